// Package testenv gives integration tests real services started by the
// project's own code: one embedded PostgreSQL and one private RabbitMQ node
// per test process, a fresh database (cloned from a migrated template) and a
// fresh RabbitMQ vhost per test, so tests never see each other's rows or
// messages.
package testenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/attune-io/attune/broker/rabbitnode"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/pgembed"
)

var (
	mu       sync.Mutex
	pg       *pgembed.Server
	pgURL    string
	rabbit   *rabbitnode.Node
	tmpRoot  string
	counter  atomic.Int64
	template = "attune_test_template"
)

// Main runs the package's tests and stops whatever services they started.
// Call it from TestMain: func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	if rabbit != nil {
		_ = rabbit.Stop()
	}
	if pg != nil {
		_ = pg.Stop()
	}
	if tmpRoot != "" {
		_ = os.RemoveAll(tmpRoot)
	}
	mu.Unlock()
	os.Exit(code)
}

func root(t testing.TB) string {
	if tmpRoot == "" {
		dir, err := os.MkdirTemp("", "attune-testenv-")
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		tmpRoot = dir
	}
	return tmpRoot
}

// Logger returns a logger for code under test: quiet unless ATTUNE_TEST_LOG=1.
func Logger(t testing.TB) *slog.Logger {
	if os.Getenv("ATTUNE_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// adminURL starts the shared PostgreSQL once and returns its URL.
func adminURL(t testing.TB) string {
	mu.Lock()
	defer mu.Unlock()
	if pgURL != "" {
		return pgURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgembed.Start(ctx, pgembed.Config{Dir: root(t) + "/postgres"})
	if err != nil {
		t.Fatalf("testenv: start embedded PostgreSQL: %v", err)
	}
	pg, pgURL = srv, srv.URL()
	// Migrate a template database once; each test clones it (fast).
	conn, err := pgx.Connect(ctx, pgURL)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+template); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	st, err := store.Open(ctx, store.Config{URL: withDB(pgURL, template), MaxConns: 4, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("testenv: migrate template: %v", err)
	}
	st.Close()
	return pgURL
}

// withDB replaces the database name of a postgres URL.
func withDB(url, db string) string {
	q := ""
	if i := strings.Index(url, "?"); i >= 0 {
		url, q = url[:i], url[i:]
	}
	return url[:strings.LastIndex(url, "/")+1] + db + q
}

// DatabaseURL returns the URL of a fresh, migrated database for this test,
// dropped when the test ends.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)
	name := fmt.Sprintf("attune_test_%d_%d", os.Getpid(), counter.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, template)); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(ctx, admin)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDB(admin, name)
}

// Store opens a store on a fresh database.
func Store(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{URL: DatabaseURL(t), MaxConns: 20, Logger: Logger(t)})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(st.Close)
	return st
}

// node starts the shared RabbitMQ node once.
func node(t testing.TB) *rabbitnode.Node {
	mu.Lock()
	defer mu.Unlock()
	if rabbit != nil {
		return rabbit
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := rabbitnode.Start(ctx, rabbitnode.Config{Dir: root(t) + "/rabbitmq"})
	if err != nil {
		t.Fatalf("testenv: start private RabbitMQ: %v", err)
	}
	rabbit = n
	return n
}

// AMQPURL returns the URL of a fresh vhost on the shared RabbitMQ node.
func AMQPURL(t testing.TB) string {
	t.Helper()
	n := node(t)
	vhost := fmt.Sprintf("test-%d-%d", os.Getpid(), counter.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url, err := n.AddVHost(ctx, vhost)
	if err != nil {
		t.Fatalf("testenv: add vhost: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = n.DeleteVHost(ctx, vhost)
	})
	return url
}
