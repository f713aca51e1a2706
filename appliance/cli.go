package appliance

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/attune-io/attune/appliance/buildinfo"
	"github.com/attune-io/attune/appliance/config"
)

// configFlags are the serve/config flags and the config keys they set.
var configFlags = []struct{ flag, key, usage string }{
	{"data-dir", "data_dir", "data directory (default $XDG_DATA_HOME/attune)"},
	{"http-addr", "http.addr", "HTTP listen address HOST:PORT (default 127.0.0.1:8080)"},
	{"database-url", "database.url", "external PostgreSQL URL; empty starts the embedded PostgreSQL"},
	{"amqp-url", "broker.url", "external RabbitMQ URL; empty starts a private RabbitMQ node"},
	{"log-format", "log.format", "log format: text or json"},
	{"log-level", "log.level", "log level: debug, info, warn, error"},
	{"roles", "roles", "engines to run: comma list of api,executor,worker (default all)"},
	{"packs-dir", "packs.dirs", "extra pack directory (repeatable)"},
}

func addConfigFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML config file")
	for _, f := range configFlags {
		if f.key == "packs.dirs" {
			fs.StringArray(f.flag, nil, f.usage)
			continue
		}
		fs.String(f.flag, "", f.usage)
	}
}

// loadConfig reads file, env and the flags the user set.
func loadConfig(fs *pflag.FlagSet) (config.Config, error) {
	path, _ := fs.GetString("config")
	overrides := map[string]any{}
	for _, f := range configFlags {
		if !fs.Changed(f.flag) {
			continue
		}
		if f.key == "packs.dirs" {
			v, _ := fs.GetStringArray(f.flag)
			overrides[f.key] = v
			continue
		}
		v, _ := fs.GetString(f.flag)
		overrides[f.key] = v
	}
	return config.Load(path, os.Environ(), overrides)
}

// NewLogger builds the process logger: text for people, JSON for machines.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	var lvl slog.Level
	_ = lvl.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lvl}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// NewRootCommand builds the attune command tree.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "attune",
		Short:         "Attune: event-driven automation in one binary",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newConfigCommand(), newVersionCommand(), newBenchCommand())
	root.AddCommand(clientCommands()...)
	return root
}

func newServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the appliance (embedded PostgreSQL and RabbitMQ unless URLs are given)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			return serve(cmd.Context(), cfg, cmd.OutOrStdout())
		},
	}
	addConfigFlags(cmd.Flags())
	return cmd
}

func serve(ctx context.Context, cfg config.Config, out io.Writer) error {
	log := NewLogger(os.Stderr, cfg.Log.Format, cfg.Log.Level)
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	app, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	log.Info("attune is ready", "dashboard", app.URL(), "admin_token_file", app.TokenPath(), "roles", cfg.Roles, "version", buildinfo.Version)
	fmt.Fprintf(out, "Attune is ready.\n  Dashboard: %s\n  Admin token: %s\n", app.URL(), app.TokenPath())
	<-ctx.Done()
	log.Info("shutting down")
	stopCtx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Worker.ShutdownTimeoutSeconds+30)*time.Second)
	defer cancel()
	app.Stop(stopCtx)
	log.Info("stopped")
	return nil
}

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective configuration (secrets redacted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd.Flags())
			if err != nil {
				return err
			}
			out, err := yaml.Marshal(toYAML(cfg.Redacted()))
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	addConfigFlags(cmd.Flags())
	return cmd
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print version, commit and build date",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "attune %s (commit %s, built %s)\n", buildinfo.Version, buildinfo.Commit, buildinfo.Date)
		},
	}
}
