// Package appliance is the composition root: it starts the parts of one
// attune process in order (database, broker, engines, HTTP) and stops them in
// reverse.
package appliance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/attune-io/attune/appliance/config"
	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/broker/rabbitnode"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
	"github.com/attune-io/attune/pgembed"
	"github.com/attune-io/attune/web"
)

// App is one running appliance process.
type App struct {
	cfg   config.Config
	log   *slog.Logger
	token string

	pg     *pgembed.Server
	rabbit *rabbitnode.Node
	store  *store.Store
	conn   *broker.Conn
	pub    *broker.Publisher
	svc    *executor.Service
	exec   *executor.Executor
	work   *worker.Worker
	http   *http.Server
	addr   net.Addr

	metrics *web.Metrics // /metrics; also the worker's observer

	stops []namedStop // in start order; run in reverse
}

type namedStop struct {
	name string
	fn   func(ctx context.Context) error
}

// Start brings up every part the config asks for. On error, whatever was
// started is stopped again before returning.
func Start(ctx context.Context, cfg config.Config, log *slog.Logger) (_ *App, err error) {
	a := &App{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			a.Stop(context.Background())
		}
	}()
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data_dir %s: %w", cfg.DataDir, err)
	}
	if a.token, err = loadOrCreateToken(filepath.Join(cfg.DataDir, "admin.token")); err != nil {
		return nil, err
	}
	dbURL, err := a.startDatabase(ctx)
	if err != nil {
		return nil, err
	}
	amqpURL, err := a.startBroker(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.Database.URL == "" || cfg.Broker.URL == "" {
		if err := writeClusterEnv(filepath.Join(cfg.DataDir, "cluster.env"), dbURL, amqpURL); err != nil {
			return nil, err
		}
	}
	if err := a.startEngines(ctx); err != nil {
		return nil, err
	}
	if err := a.startHTTP(); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *App) onStop(name string, fn func(ctx context.Context) error) {
	a.stops = append(a.stops, namedStop{name, fn})
}

func (a *App) startDatabase(ctx context.Context) (string, error) {
	url := a.cfg.Database.URL
	if url == "" {
		a.warnAlone()
		a.log.Info("starting embedded PostgreSQL", "dir", filepath.Join(a.cfg.DataDir, "postgres"))
		pg, err := pgembed.Start(ctx, pgembed.Config{
			Dir:    filepath.Join(a.cfg.DataDir, "postgres"),
			BinDir: a.cfg.Database.PostgresBinDir,
			Logger: a.log.With("part", "postgres"),
		})
		if err != nil {
			return "", fmt.Errorf("embedded PostgreSQL: %w", err)
		}
		a.pg = pg
		a.onStop("embedded PostgreSQL", func(context.Context) error { return pg.Stop() })
		url = pg.URL()
	}
	st, err := store.Open(ctx, store.Config{URL: url, MaxConns: int32(a.cfg.Database.MaxConns), Logger: a.log.With("part", "store")})
	if err != nil {
		return "", err
	}
	a.store = st
	a.onStop("database pool", func(context.Context) error { st.Close(); return nil })
	if err := st.Migrate(ctx); err != nil {
		return "", err
	}
	return url, nil
}

func (a *App) startBroker(ctx context.Context) (string, error) {
	url := a.cfg.Broker.URL
	if url == "" {
		a.log.Info("starting private RabbitMQ node", "dir", filepath.Join(a.cfg.DataDir, "rabbitmq"))
		node, err := rabbitnode.Start(ctx, rabbitnode.Config{
			Dir:        filepath.Join(a.cfg.DataDir, "rabbitmq"),
			ServerPath: a.cfg.Broker.RabbitMQServer,
			Logger:     a.log.With("part", "rabbitmq"),
		})
		if err != nil {
			return "", fmt.Errorf("private RabbitMQ: %w", err)
		}
		a.rabbit = node
		a.onStop("private RabbitMQ", func(context.Context) error { return node.Stop() })
		url = node.URL()
	}
	conn, err := broker.Dial(ctx, url, a.log.With("part", "broker"))
	if err != nil {
		return "", err
	}
	a.conn = conn
	a.onStop("broker connection", func(context.Context) error { return conn.Close() })
	// Each part declares what it consumes when it subscribes; the exchanges
	// are declared here so publishers can publish before any consumer runs.
	if err := conn.Declare(ctx, broker.DeclareExchanges); err != nil {
		return "", err
	}
	return url, nil
}

func (a *App) startHTTP() error {
	ln, err := net.Listen("tcp", a.cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("http.addr %s: %w", a.cfg.HTTP.Addr, err)
	}
	a.addr = ln.Addr()
	deps := web.Deps{
		Logger:  a.log.With("part", "http"),
		Token:   a.token,
		Metrics: a.metrics.Handler(),
		// The dashboard's live feed: this node's queue on attune.notifications.
		Notifications: web.BrokerNotifications(a.conn),
		Checks: map[string]web.Check{
			"database": a.store.Ping,
			"broker":   a.conn.Ping,
		},
	}
	if a.cfg.HasRole(config.RoleAPI) {
		// Without the api role /api/v1 answers 503; health and metrics stay.
		deps.Engine, deps.Reader = a.svc, a.store
	}
	router := web.NewRouter(deps)
	a.http = &http.Server{Handler: router, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := a.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server stopped", "err", err)
		}
	}()
	a.onStop("http server", a.http.Shutdown)
	return nil
}

// warnAlone warns when a process without the executor role starts its own
// embedded services: nothing would ever dispatch to its worker, nor run
// what its API accepts. To join an appliance, pass its URLs (cluster.env).
func (a *App) warnAlone() {
	if !a.cfg.HasRole(config.RoleExecutor) {
		a.log.Warn("no executor role and no database.url: this process starts its own embedded services, so nothing "+
			"will dispatch its work; to join an appliance run `env $(cat <its data dir>/cluster.env) attune serve …`",
			"roles", a.cfg.Roles)
	}
}

// Addr is the address the HTTP server listens on.
func (a *App) Addr() net.Addr { return a.addr }

// URL is the base URL of the dashboard and API.
func (a *App) URL() string { return "http://" + a.addr.String() }

// TokenPath is where the admin token is stored.
func (a *App) TokenPath() string { return filepath.Join(a.cfg.DataDir, "admin.token") }

// Stop stops every started part in reverse order.
func (a *App) Stop(ctx context.Context) {
	for i := len(a.stops) - 1; i >= 0; i-- {
		s := a.stops[i]
		start := time.Now()
		if err := s.fn(ctx); err != nil {
			a.log.Warn("stop failed", "part", s.name, "err", err)
		} else {
			a.log.Info("stopped", "part", s.name, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	a.stops = nil
}

// loadOrCreateToken reads the admin token, creating it (0600) on first start.
func loadOrCreateToken(path string) (string, error) {
	if b, err := os.ReadFile(path); err == nil {
		tok := strings.TrimSpace(string(b))
		if tok != "" {
			return tok, nil
		}
	} else if !os.IsNotExist(err) {
		return "", fmt.Errorf("admin token %s: %w", path, err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	tok := hex.EncodeToString(buf)
	if err := os.WriteFile(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write admin token: %w", err)
	}
	return tok, nil
}

// writeClusterEnv records the embedded services' URLs so another appliance on
// this host can join them (`env $(cat cluster.env) attune serve --roles worker`).
func writeClusterEnv(path, dbURL, amqpURL string) error {
	body := fmt.Sprintf("ATTUNE__DATABASE__URL=%s\nATTUNE__BROKER__URL=%s\n", dbURL, amqpURL)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
