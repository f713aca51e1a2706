// Package config is the appliance's one table of settings: defaults, a YAML
// file, ATTUNE__SECTION__KEY environment variables and command-line flags, in
// rising precedence, validated in one place.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"
)

// EnvPrefix is the prefix of environment variables that set config keys;
// nesting is spelled with a double underscore (ATTUNE__HTTP__ADDR).
const EnvPrefix = "ATTUNE__"

// Role names an engine a process runs; a process may run several.
const (
	RoleAPI      = "api"
	RoleExecutor = "executor"
	RoleWorker   = "worker"
)

// Config is the effective configuration of one appliance process.
type Config struct {
	DataDir  string         `koanf:"data_dir"`
	Roles    []string       `koanf:"roles"`
	Log      LogConfig      `koanf:"log"`
	HTTP     HTTPConfig     `koanf:"http"`
	Database DatabaseConfig `koanf:"database"`
	Broker   BrokerConfig   `koanf:"broker"`
	Packs    PacksConfig    `koanf:"packs"`
	Executor ExecutorConfig `koanf:"executor"`
	Worker   WorkerConfig   `koanf:"worker"`
}

// LogConfig controls log/slog output.
type LogConfig struct {
	Level  string `koanf:"level"`
	Format string `koanf:"format"`
}

// HTTPConfig controls the API and dashboard listener.
type HTTPConfig struct {
	Addr string `koanf:"addr"`
}

// DatabaseConfig selects an external PostgreSQL or tunes the embedded one.
type DatabaseConfig struct {
	URL            string `koanf:"url"`
	PostgresBinDir string `koanf:"postgres_bin_dir"`
	MaxConns       int    `koanf:"max_conns"`
}

// BrokerConfig selects an external RabbitMQ or tunes the private node.
type BrokerConfig struct {
	URL              string `koanf:"url"`
	RabbitMQServer   string `koanf:"rabbitmq_server"`
	WorkerQueueTTLms int    `koanf:"worker_queue_ttl_ms"`
}

// PacksConfig lists extra pack directories loaded at start.
type PacksConfig struct {
	Dirs []string `koanf:"dirs"`
}

// ExecutorConfig tunes scheduling, admission defaults and recovery loops.
type ExecutorConfig struct {
	ScheduledTimeoutSeconds int         `koanf:"scheduled_timeout_seconds"`
	NoWorkerWaitSeconds     float64     `koanf:"no_worker_wait_seconds"`
	RedriveAfterSeconds     float64     `koanf:"redrive_after_seconds"`
	Queue                   QueueConfig `koanf:"queue"`
}

// QueueConfig holds the defaults for per-action FIFO queues.
type QueueConfig struct {
	MaxQueueLength      int `koanf:"max_queue_length"`
	QueueTimeoutSeconds int `koanf:"queue_timeout_seconds"`
}

// WorkerConfig tunes the worker engine of this process.
type WorkerConfig struct {
	ID                       string  `koanf:"id"`
	Capacity                 int     `koanf:"capacity"`
	HeartbeatIntervalSeconds float64 `koanf:"heartbeat_interval_seconds"`
	ShutdownTimeoutSeconds   float64 `koanf:"shutdown_timeout_seconds"`
	KillGraceSeconds         float64 `koanf:"kill_grace_seconds"`
}

// Default returns the built-in defaults.
func Default() Config {
	return Config{
		Roles:    []string{RoleAPI, RoleExecutor, RoleWorker},
		Log:      LogConfig{Level: "info", Format: "text"},
		HTTP:     HTTPConfig{Addr: "127.0.0.1:8080"},
		Database: DatabaseConfig{MaxConns: 20},
		Broker:   BrokerConfig{WorkerQueueTTLms: 300000},
		Executor: ExecutorConfig{
			ScheduledTimeoutSeconds: 300,
			NoWorkerWaitSeconds:     5,
			RedriveAfterSeconds:     10,
			Queue:                   QueueConfig{MaxQueueLength: 10000, QueueTimeoutSeconds: 3600},
		},
		Worker: WorkerConfig{Capacity: 32, HeartbeatIntervalSeconds: 10, ShutdownTimeoutSeconds: 30, KillGraceSeconds: 5},
	}
}

// Load builds the effective config: defaults, then the YAML file at path (if
// not empty), then the environment, then overrides (flag values keyed by
// config key, e.g. "http.addr"). The result is validated.
func Load(path string, environ []string, overrides map[string]any) (Config, error) {
	k := koanf.New(".")
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
		if err := k.Load(file.Provider(path), yaml.Parser()); err != nil {
			return Config{}, fmt.Errorf("config file %s: %w", path, err)
		}
	}
	if err := k.Load(envProvider(environ), nil); err != nil {
		return Config{}, fmt.Errorf("environment: %w", err)
	}
	for key, v := range overrides {
		if err := k.Set(key, v); err != nil {
			return Config{}, fmt.Errorf("%s: %w", key, err)
		}
	}
	cfg := Default()
	err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook:       mapstructure.ComposeDecodeHookFunc(mapstructure.StringToSliceHookFunc(",")),
			ErrorUnused:      true,
			WeaklyTypedInput: true,
			Result:           &cfg,
			TagName:          "koanf",
		},
	})
	if err != nil {
		return Config{}, fmt.Errorf("invalid config: %s", cleanDecodeError(err))
	}
	if err := cfg.resolve(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// envProvider maps ATTUNE__EXECUTOR__QUEUE__MAX_QUEUE_LENGTH to
// executor.queue.max_queue_length. It reads the given list rather than
// os.Environ (as koanf's env provider does) so tests stay hermetic.
func envProvider(environ []string) koanf.Provider {
	return envList(environ)
}

type envList []string

func (e envList) ReadBytes() ([]byte, error) { return nil, errors.New("not supported") }

func (e envList) Read() (map[string]any, error) {
	out := map[string]any{}
	for _, kv := range e {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(name, EnvPrefix) {
			continue
		}
		key := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix), "__", "."))
		setNested(out, strings.Split(key, "."), val)
	}
	return out, nil
}

func setNested(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// cleanDecodeError turns mapstructure's messages into ones naming the key.
func cleanDecodeError(err error) string {
	msg := err.Error()
	msg = strings.ReplaceAll(msg, "decoding failed due to the following error(s):\n\n", "")
	msg = strings.ReplaceAll(msg, "has invalid keys", "has unknown keys")
	return strings.TrimSpace(msg)
}

// resolve fills values derived from the environment (the default data dir).
func (c *Config) resolve() error {
	if c.DataDir == "" {
		base := os.Getenv("XDG_DATA_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("data_dir: cannot find a home directory (%v); set --data-dir", err)
			}
			base = filepath.Join(home, ".local", "share")
		}
		c.DataDir = filepath.Join(base, "attune")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return fmt.Errorf("data_dir: %w", err)
	}
	c.DataDir = abs
	for i, r := range c.Roles {
		c.Roles[i] = strings.ToLower(strings.TrimSpace(r))
	}
	return nil
}

// Validate checks every value and names the key of the first bad one.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}
	if len(c.Roles) == 0 {
		bad("roles", "at least one of api, executor, worker is required")
	}
	for _, r := range c.Roles {
		if !slices.Contains([]string{RoleAPI, RoleExecutor, RoleWorker}, r) {
			bad("roles", "unknown role %q (want api, executor or worker)", r)
		}
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		bad("log.format", "%q is not one of text, json", c.Log.Format)
	}
	if err := validateAddr(c.HTTP.Addr); err != nil {
		bad("http.addr", "%v", err)
	}
	if c.Database.URL != "" && !strings.HasPrefix(c.Database.URL, "postgres://") && !strings.HasPrefix(c.Database.URL, "postgresql://") {
		bad("database.url", "must start with postgres:// or postgresql://")
	}
	if c.Database.MaxConns < 2 {
		bad("database.max_conns", "must be at least 2, got %d", c.Database.MaxConns)
	}
	if c.Broker.URL != "" && !strings.HasPrefix(c.Broker.URL, "amqp://") && !strings.HasPrefix(c.Broker.URL, "amqps://") {
		bad("broker.url", "must start with amqp:// or amqps://")
	}
	if c.Broker.WorkerQueueTTLms <= 0 || c.Broker.WorkerQueueTTLms > 1<<31-1 {
		bad("broker.worker_queue_ttl_ms", "must be between 1 and 2147483647, got %d", c.Broker.WorkerQueueTTLms)
	}
	if c.Executor.ScheduledTimeoutSeconds <= 0 {
		bad("executor.scheduled_timeout_seconds", "must be positive, got %d", c.Executor.ScheduledTimeoutSeconds)
	}
	if c.Executor.NoWorkerWaitSeconds < 0 {
		bad("executor.no_worker_wait_seconds", "must not be negative, got %v", c.Executor.NoWorkerWaitSeconds)
	}
	if c.Executor.RedriveAfterSeconds <= 0 {
		bad("executor.redrive_after_seconds", "must be positive, got %v", c.Executor.RedriveAfterSeconds)
	}
	if c.Executor.Queue.MaxQueueLength <= 0 {
		bad("executor.queue.max_queue_length", "must be positive, got %d", c.Executor.Queue.MaxQueueLength)
	}
	if c.Executor.Queue.QueueTimeoutSeconds <= 0 {
		bad("executor.queue.queue_timeout_seconds", "must be positive, got %d", c.Executor.Queue.QueueTimeoutSeconds)
	}
	if c.Worker.Capacity <= 0 {
		bad("worker.capacity", "must be positive, got %d", c.Worker.Capacity)
	}
	if c.Worker.HeartbeatIntervalSeconds <= 0 {
		bad("worker.heartbeat_interval_seconds", "must be positive, got %v", c.Worker.HeartbeatIntervalSeconds)
	}
	if c.Worker.ShutdownTimeoutSeconds < 0 {
		bad("worker.shutdown_timeout_seconds", "must not be negative, got %v", c.Worker.ShutdownTimeoutSeconds)
	}
	if c.Worker.KillGraceSeconds < 0 {
		bad("worker.kill_grace_seconds", "must not be negative, got %v", c.Worker.KillGraceSeconds)
	}
	return errors.Join(errs...)
}

func validateAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not HOST:PORT", addr)
	}
	_ = host
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("port %q is not a number between 0 and 65535", port)
	}
	return nil
}

// HasRole reports whether this process runs the named engine.
func (c Config) HasRole(r string) bool { return slices.Contains(c.Roles, r) }

// Seconds converts a float seconds setting to a duration.
func Seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Redacted returns a copy with secrets (passwords inside URLs) masked, for
// printing and logging.
func (c Config) Redacted() Config {
	c.Roles = slices.Clone(c.Roles)
	c.Database.URL = RedactURL(c.Database.URL)
	c.Broker.URL = RedactURL(c.Broker.URL)
	return c
}

// RedactURL masks the password of a URL's userinfo.
func RedactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return u
	}
	user, _, hasPass := strings.Cut(rest[:at], ":")
	if !hasPass {
		return u
	}
	return scheme + "://" + user + ":REDACTED@" + rest[at+1:]
}
