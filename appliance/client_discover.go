package appliance

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/attune-io/attune/appliance/config"
)

// Environment variables the CLI reads to find the appliance.
const (
	EnvServer = "ATTUNE_SERVER" // base URL, e.g. http://10.0.0.5:8080
	EnvToken  = "ATTUNE_TOKEN"  // admin API token
)

// systemConfigPath is the packaged service's config file; the CLI falls
// back to it when the user's own data dir holds no admin token.
var systemConfigPath = "/etc/attune/attune.yaml"

// target is where the CLI sends its requests, and with which token.
type target struct {
	Server string
	Token  string
}

// discoverOptions are the inputs of discover: flag values ("" = not set)
// and the environment.
type discoverOptions struct {
	Server     string
	Token      string
	ConfigPath string
	DataDir    string
	Environ    []string
}

// addClientFlags adds the flags every client command takes.
func addClientFlags(fs *pflag.FlagSet) {
	fs.String("server", "", "appliance URL, e.g. http://host:8080 (default $"+EnvServer+", else http.addr of the local config)")
	fs.String("token", "", "API token (default $"+EnvToken+", else <data-dir>/admin.token)")
	fs.String("config", "", "config file of the local appliance (to find its address and data dir)")
	fs.String("data-dir", "", "data dir of the local appliance (holds admin.token)")
	fs.Bool("json", false, "print JSON as the API returns it")
}

// clientFromFlags builds a Client from the flags, the environment and, on
// the appliance's own host, its config and data dir.
func clientFromFlags(fs *pflag.FlagSet) (*Client, error) {
	opts := discoverOptions{Environ: os.Environ()}
	opts.Server, _ = fs.GetString("server")
	opts.Token, _ = fs.GetString("token")
	opts.ConfigPath, _ = fs.GetString("config")
	opts.DataDir, _ = fs.GetString("data-dir")
	t, err := discover(opts)
	if err != nil {
		return nil, err
	}
	return NewClient(t.Server, t.Token), nil
}

// discover finds the server and token: flags first, then ATTUNE_SERVER /
// ATTUNE_TOKEN, then the local appliance's config (http.addr) and
// <data_dir>/admin.token, so that `attune run` on the same machine just
// works.
func discover(o discoverOptions) (target, error) {
	t := target{Server: o.Server, Token: o.Token}
	if t.Server == "" {
		t.Server = lookupEnv(o.Environ, EnvServer)
	}
	if t.Token == "" {
		t.Token = strings.TrimSpace(lookupEnv(o.Environ, EnvToken))
	}
	if t.Server == "" || t.Token == "" {
		cfg, err := localConfig(o)
		if err != nil {
			return t, fmt.Errorf("finding the local appliance: %w (or pass --server and --token, or set %s and %s)", err, EnvServer, EnvToken)
		}
		if t.Server == "" {
			if t.Server, err = serverFromAddr(cfg.HTTP.Addr); err != nil {
				return t, err
			}
		}
		if t.Token == "" {
			if t.Token, err = readToken(filepath.Join(cfg.DataDir, "admin.token")); err != nil {
				return t, err
			}
		}
	}
	server, err := normalizeServer(t.Server)
	if err != nil {
		return t, err
	}
	t.Server = server
	return t, nil
}

// localConfig loads the config the way `attune serve` would, with the
// --config and --data-dir flags. Without either, when the user's default
// data dir has no admin token but the packaged service's config exists,
// that config is used (the CLI run on a host where the .deb/.rpm runs).
func localConfig(o discoverOptions) (config.Config, error) {
	overrides := map[string]any{}
	if o.DataDir != "" {
		overrides["data_dir"] = o.DataDir
	}
	cfg, err := config.Load(o.ConfigPath, o.Environ, overrides)
	if err != nil || o.ConfigPath != "" || o.DataDir != "" || lookupEnv(o.Environ, config.EnvPrefix+"DATA_DIR") != "" {
		return cfg, err
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "admin.token")); err == nil {
		return cfg, nil
	}
	if _, err := os.Stat(systemConfigPath); err != nil {
		return cfg, nil
	}
	if sys, err := config.Load(systemConfigPath, o.Environ, overrides); err == nil {
		return sys, nil
	}
	return cfg, nil
}

// serverFromAddr turns a listen address into a URL to dial: a wildcard
// host becomes loopback.
func serverFromAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("http.addr %q is not HOST:PORT; pass --server", addr)
	}
	if port == "0" {
		return "", fmt.Errorf("http.addr %q uses a random port; pass --server with the address `attune serve` printed", addr)
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::", "[::]":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// readToken reads the admin token file, explaining what to do when it
// cannot.
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("no API token: %s does not exist (has `attune serve` run with this data dir?); pass --token or set %s", path, EnvToken)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Errorf("cannot read the API token %s: permission denied (run as the appliance's user or root, or pass --token / set %s)", path, EnvToken)
	case err != nil:
		return "", fmt.Errorf("reading the API token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the API token file %s is empty; pass --token or set %s", path, EnvToken)
	}
	return tok, nil
}

// normalizeServer accepts "host:port" or a URL and returns a base URL
// without a trailing slash.
func normalizeServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid server %q: want http://HOST:PORT", s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// lookupEnv finds name in an environ list.
func lookupEnv(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}
