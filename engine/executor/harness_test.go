package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// cluster is one database and one vhost shared by any number of executor
// and worker engines, as in cluster mode.
type cluster struct {
	t     *testing.T
	st    *store.Store
	url   string
	svc   *executor.Service
	conn  *broker.Conn
	pub   *broker.Publisher
	packs string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, st: testenv.Store(t), url: testenv.AMQPURL(t)}
	c.conn, c.pub = c.dial()
	c.svc = executor.NewService(c.st, c.pub, testenv.Logger(t), 10000)
	c.packs = t.TempDir()
	require.NoError(t, c.st.UpsertPack(context.Background(), store.Pack{Ref: "core"}))
	require.NoError(t, c.st.UpsertPack(context.Background(), store.Pack{Ref: "t", Path: c.packs}))
	for _, name := range []string{"noop", "echo", "sleep", "local"} {
		c.action(store.Action{Ref: "core." + name, Pack: "core", Name: name, Runtime: "builtin", Entrypoint: name})
	}
	return c
}

func (c *cluster) dial() (*broker.Conn, *broker.Publisher) {
	conn, err := broker.Dial(context.Background(), c.url, testenv.Logger(c.t))
	require.NoError(c.t, err)
	pub := broker.NewPublisher(conn)
	c.t.Cleanup(func() { _ = pub.Close(); _ = conn.Close() })
	return conn, pub
}

func (c *cluster) action(a store.Action) {
	c.t.Helper()
	if a.Pack == "" {
		a.Pack = "t"
	}
	_, err := c.svc.RegisterAction(context.Background(), a)
	require.NoError(c.t, err)
}

// script writes an executable file into the test pack.
func (c *cluster) script(name, body string) string {
	p := filepath.Join(c.packs, name)
	require.NoError(c.t, os.WriteFile(p, []byte(body), 0o755))
	return name
}

type executorOpt func(*executor.Config)

func (c *cluster) executor(opts ...executorOpt) *executor.Executor {
	c.t.Helper()
	cfg := executor.Config{NoWorkerWait: 500 * time.Millisecond, HeartbeatInterval: time.Second, RedriveAfter: time.Second, LoopInterval: 200 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	conn, pub := c.dial()
	svc := executor.NewService(c.st, pub, testenv.Logger(c.t), 10000)
	ex := executor.New(cfg, svc, conn, testenv.Logger(c.t))
	ex.Start(context.Background())
	c.t.Cleanup(ex.Stop)
	waitClosed(c.t, ex.Ready)
	return ex
}

func (c *cluster) worker(cfg worker.Config) *worker.Worker {
	c.t.Helper()
	if cfg.ID == "" {
		cfg.ID = fmt.Sprintf("w-%d", time.Now().UnixNano())
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Second
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = 500 * time.Millisecond
	}
	conn, pub := c.dial()
	w := worker.New(cfg, c.st, conn, pub, testenv.Logger(c.t))
	require.NoError(c.t, w.Start(context.Background()))
	c.t.Cleanup(func() { w.Stop(context.Background()) })
	waitClosed(c.t, w.Ready)
	return w
}

func waitClosed(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("engine did not become ready")
	}
}

func (c *cluster) run(ref string, params map[string]any) store.Execution {
	c.t.Helper()
	e, err := c.svc.RequestExecution(context.Background(), executor.RunRequest{ActionRef: ref, Parameters: params})
	require.NoError(c.t, err)
	return e
}

// wait polls the execution until it reaches a final status.
func (c *cluster) wait(id int64, within time.Duration) store.Execution {
	c.t.Helper()
	return c.waitFor(id, within, store.IsFinal)
}

func (c *cluster) waitFor(id int64, within time.Duration, ok func(status string) bool) store.Execution {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		e, err := c.st.GetExecution(context.Background(), id)
		require.NoError(c.t, err)
		if ok(e.Status) {
			return e
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("execution %d still %s after %s (reason: %v)", id, e.Status, within, deref(e.StatusReason))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func resultOf(t *testing.T, e store.Execution) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Result, &m), "result %s", e.Result)
	return m
}
