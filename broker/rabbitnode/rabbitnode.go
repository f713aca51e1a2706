// Package rabbitnode launches and stops a private RabbitMQ node for the appliance,
// so that `attune serve` works without an operator-provided broker.
//
// Everything the node owns lives under Config.Dir: its Erlang cookie (a private
// HOME), mnesia, logs, config, pid files and remembered ports. It binds to
// loopback only, runs its own epmd on a non-standard port, and never touches a
// system-wide RabbitMQ (5672/25672/4369). It works as root and as a normal user.
package rabbitnode

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config for a private RabbitMQ node.
type Config struct {
	// Dir is the root dir owned by the node: home/ (private .erlang.cookie), mnesia/, log/,
	// rabbitmq.conf, enabled_plugins, pid files, ports.json, amqp-password. Created 0700.
	Dir string
	// ServerPath is the rabbitmq-server script; "" = discover (see FindServer).
	// rabbitmqctl is expected beside it.
	ServerPath string
	// NodeName defaults to "attune-<8 hex of sha256(abs Dir)>@localhost" so two
	// appliances on one host never collide.
	NodeName string
	// AMQPPort, DistPort and EPMDPort: 0 = reuse the ports remembered in Dir if they are
	// still free, else pick free loopback ports and remember them. Explicit values are used
	// as given, but the standard ports (5672, 25672, 4369, 35672) are always refused.
	AMQPPort, DistPort, EPMDPort int
	// StartTimeout bounds Start; default 60s.
	StartTimeout time.Duration
	// Logger receives lifecycle events; nil = discard.
	Logger *slog.Logger
}

// ErrNotInstalled is wrapped by FindServer (and Start) when no usable
// rabbitmq-server exists, so callers can tell "missing dependency" from a broken node.
var ErrNotInstalled = errors.New("rabbitmq-server not found")

const (
	debianServer = "/usr/lib/rabbitmq/bin/rabbitmq-server"
	amqpUser     = "attune"
	installHint  = "install rabbitmq-server (e.g. apt-get install rabbitmq-server), or pass --amqp-url to use an external RabbitMQ"
)

// FindServer resolves the rabbitmq-server script to run: configured if non-empty,
// else the Debian package location, else PATH. The /usr/sbin wrappers of the Debian
// package are skipped because they su to the rabbitmq user and use its data dir.
func FindServer(configured string) (string, error) {
	usable := func(p string) bool {
		st, err := os.Stat(p)
		ctl, err2 := os.Stat(filepath.Join(filepath.Dir(p), "rabbitmqctl"))
		return err == nil && err2 == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && ctl.Mode()&0o111 != 0
	}
	if configured != "" {
		if usable(configured) {
			return configured, nil
		}
		return "", fmt.Errorf("%w: %s is not an executable rabbitmq-server with rabbitmqctl beside it; %s", ErrNotInstalled, configured, installHint)
	}
	if usable(debianServer) {
		return debianServer, nil
	}
	if p, err := exec.LookPath("rabbitmq-server"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && filepath.Base(real) == "rabbitmq-server" && usable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w (looked in %s and PATH); %s", ErrNotInstalled, debianServer, installHint)
}

// findEpmd locates epmd, which we start ourselves so that it listens on loopback,
// carries its port on its command line and is ours to kill.
func findEpmd() (string, error) {
	if p, err := exec.LookPath("epmd"); err == nil {
		return p, nil
	}
	if m, _ := filepath.Glob("/usr/lib/erlang/erts-*/bin/epmd"); len(m) > 0 {
		return m[len(m)-1], nil
	}
	return "", fmt.Errorf("%w: epmd (Erlang) not found; %s", ErrNotInstalled, installHint)
}

// Node is a running private RabbitMQ node. Stop it with Stop; the context given to
// Start only bounds startup, it does not control the node's lifetime.
type Node struct {
	dir, name, home, ctlPath, epmdPath string
	ports                              ports
	password                           string
	env                                []string
	log                                *slog.Logger
	lock                               *os.File

	server, epmd         *exec.Cmd
	serverDone, epmdDone chan struct{}

	stopOnce sync.Once
	stopErr  error
}

// URL returns the AMQP URL of the node. It uses the dedicated user "attune" whose
// random password is kept 0600 in Dir/amqp-password (guest is never created).
func (n *Node) URL() string {
	return fmt.Sprintf("amqp://%s:%s@127.0.0.1:%d/", amqpUser, n.password, n.ports.AMQP)
}

func (n *Node) path(parts ...string) string {
	return filepath.Join(append([]string{n.dir}, parts...)...)
}

// Start launches the node and returns once `rabbitmqctl await_startup` succeeded and
// an AMQP connection with URL() works. Only one Node may own a Dir at a time (an
// flock on Dir/.lock); a second Start on a Dir in use fails. A node left running by
// a crashed previous run on this Dir (its owner's lock is gone) is stopped first —
// what a user restarting after a crash expects — and a warning is logged.
func Start(ctx context.Context, cfg Config) (_ *Node, err error) {
	if cfg.Dir == "" {
		return nil, errors.New("rabbitnode: Config.Dir is required")
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, err
	}
	if cfg.ServerPath, err = FindServer(cfg.ServerPath); err != nil {
		return nil, err
	}
	epmdPath, err := findEpmd()
	if err != nil {
		return nil, err
	}
	if cfg.NodeName == "" {
		sum := sha256.Sum256([]byte(dir))
		cfg.NodeName = "attune-" + hex.EncodeToString(sum[:4]) + "@localhost"
	}
	if !strings.Contains(cfg.NodeName, "@") {
		cfg.NodeName += "@localhost"
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	n := &Node{dir: dir, name: cfg.NodeName, home: filepath.Join(dir, "home"), epmdPath: epmdPath,
		ctlPath: filepath.Join(filepath.Dir(cfg.ServerPath), "rabbitmqctl"),
		log:     cfg.Logger.With("component", "rabbitnode", "node", cfg.NodeName)}
	for _, d := range []string{dir, n.home, n.path("mnesia"), n.path("log")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("rabbitnode: %w", err)
		}
	}
	if n.lock, err = lockDir(n.path(".lock")); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Stop() // releases the lock and whatever was started
		}
	}()
	n.stopStale()
	if n.ports, err = choosePorts(n.path("ports.json"), ports{cfg.AMQPPort, cfg.DistPort, cfg.EPMDPort}); err != nil {
		return nil, err
	}
	if err = n.writeFiles(); err != nil {
		return nil, fmt.Errorf("rabbitnode: %w", err)
	}
	n.env = n.environ()
	t0 := time.Now()
	n.log.Info("starting private RabbitMQ", "dir", dir, "amqp_port", n.ports.AMQP, "dist_port", n.ports.Dist, "epmd_port", n.ports.EPMD)
	if err = n.startEpmd(); err != nil {
		return nil, err
	}
	if err = n.startServer(cfg.ServerPath); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	if err = n.waitReady(wctx); err != nil {
		return nil, err
	}
	n.log.Info("private RabbitMQ ready", "elapsed", time.Since(t0).Round(time.Millisecond), "amqp_port", n.ports.AMQP)
	return n, nil
}

// lockDir takes an exclusive flock that dies with our process (Go opens files
// close-on-exec, so the Erlang children do not inherit it). It is how a restart
// tells "crashed owner, stale node" from "another live appliance owns this Dir".
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("rabbitnode: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		return nil, fmt.Errorf("rabbitnode: %s is in use by another running process (pid %s); stop it or use another data dir", filepath.Dir(path), strings.TrimSpace(string(b)))
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// stopStale removes what a crashed previous owner of Dir left running. We hold the
// lock, so anything using our HOME is an orphan. SIGTERM lets RabbitMQ shut down
// cleanly (mnesia stays consistent); SIGKILL follows if it hangs.
func (n *Node) stopStale() {
	if pids := beamsWithHome(n.home); len(pids) > 0 {
		n.log.Warn("stopping RabbitMQ left running by a previous run on this dir", "pids", pids)
		var all []int
		for _, p := range pids {
			all = append(all, descendants(p)...)
		}
		terminate(pids, 10*time.Second)
		killAndWait(all, syscall.SIGKILL, time.Second)
	}
	if p := readPid(n.path("epmd.pid")); alive(p) {
		if args := cmdline(p); len(args) > 0 && filepath.Base(args[0]) == "epmd" {
			terminate([]int{p}, time.Second)
		}
	}
}

// writeFiles writes config and credentials. The password is created once and
// reused, so URL() stays stable across restarts of the same Dir.
func (n *Node) writeFiles() error {
	pwFile := n.path("amqp-password")
	if b, err := os.ReadFile(pwFile); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		n.password = strings.TrimSpace(string(b))
	} else {
		n.password = rand.Text()
		if err := os.WriteFile(pwFile, []byte(n.password+"\n"), 0o600); err != nil {
			return err
		}
	}
	// default_user/pass only take effect when mnesia is created; later mismatches are
	// repaired in waitReady. log.console=false: the node logs to log/<node>.log.
	// The rotation keys bound the node log of a long-running appliance.
	conf := fmt.Sprintf("loopback_users = none\nlog.console = false\nlog.file.level = info\n"+
		"log.file.rotation.size = 10485760\nlog.file.rotation.count = 5\n"+
		"default_user = %s\ndefault_pass = %s\n", amqpUser, n.password)
	files := map[string]string{"rabbitmq.conf": conf, "enabled_plugins": "[].\n",
		"rabbitmq-env.conf": "# empty on purpose: hides /etc/rabbitmq/rabbitmq-env.conf\n"}
	for name, body := range files {
		if err := os.WriteFile(n.path(name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// environ builds the private environment shared by server and rabbitmqctl: the
// caller's RABBITMQ_*/ERL_* settings are dropped so nothing leaks in from a system node.
func (n *Node) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RABBITMQ_") && !strings.HasPrefix(kv, "ERL_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	if os.Getenv("LANG") == "" && os.Getenv("LC_ALL") == "" {
		env = append(env, "LANG=C.UTF-8") // the Elixir CLI warns about latin1 otherwise
	}
	loopback := "-kernel inet_dist_use_interface {127,0,0,1}" // dist port on loopback only
	return append(env,
		"HOME="+n.home,
		"RABBITMQ_NODENAME="+n.name,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT="+strconv.Itoa(n.ports.AMQP),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(n.ports.Dist),
		"ERL_EPMD_PORT="+strconv.Itoa(n.ports.EPMD),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"RABBITMQ_MNESIA_BASE="+n.path("mnesia"),
		"RABBITMQ_LOG_BASE="+n.path("log"),
		"RABBITMQ_CONFIG_FILE="+n.path("rabbitmq"),
		"RABBITMQ_ADVANCED_CONFIG_FILE="+n.path("advanced.config"),
		"RABBITMQ_CONF_ENV_FILE="+n.path("rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+n.path("enabled_plugins"),
		"RABBITMQ_PID_FILE="+n.path("rabbit.pid"),
		"RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+loopback,
		"RABBITMQ_CTL_ERL_ARGS="+loopback,
		// rabbitmqctl defaults to ports 35672-35682 for its own node: shared by every
		// CLI call on the host. 0 lets the kernel pick, so concurrent calls never clash.
		"RABBITMQ_CTL_DIST_PORT_MIN=0", "RABBITMQ_CTL_DIST_PORT_MAX=0",
		"ERL_CRASH_DUMP="+n.path("log", "erl_crash.dump"),
	)
}
