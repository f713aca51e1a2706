package executor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

// Worker availability (issue 5, scenarios 2 and 3, and the fence on late
// results). Shutdown, drain and cordon are in shutdown_test.go; a worker
// process killed with SIGKILL is in appliance/cluster_test.go.

// countObserver counts what a worker reports to its worker.Observer.
type countObserver struct{ started, finished, rejected atomic.Int64 }

func (o *countObserver) ExecutionStarted(string, time.Duration)          { o.started.Add(1) }
func (o *countObserver) ExecutionFinished(string, string, time.Duration) { o.finished.Add(1) }
func (o *countObserver) LateResultRejected(string)                       { o.rejected.Add(1) }

func heartbeat(d time.Duration) executorOpt {
	return func(c *executor.Config) { c.HeartbeatInterval = d }
}

// limitedSleep registers t.slow: the builtin sleep with concurrency limit 1.
func limitedSleep(c *cluster) {
	one := 1
	c.action(store.Action{Ref: "t.slow", Name: "slow", Runtime: "builtin", Entrypoint: "sleep",
		Policy: store.Policy{Concurrency: store.Concurrency{Limit: &one}}})
}

func workerStatus(t *testing.T, c *cluster, id string) string {
	t.Helper()
	w, err := c.st.GetWorker(context.Background(), id)
	require.NoError(t, err)
	return w.Status
}

func TestLateResultFromDeadWorkerIsRejected(t *testing.T) {
	c := newCluster(t)
	limitedSleep(c)
	c.executor(heartbeat(500 * time.Millisecond)) // stale after 1.5 s
	obs := &countObserver{}
	// Its heartbeat never comes after registration: it is alive but looks dead.
	c.worker(worker.Config{ID: "w-silent", HeartbeatInterval: time.Hour, Observer: obs})
	first := c.run("t.slow", map[string]any{"seconds": 4})
	next := c.run("t.slow", map[string]any{"seconds": 0})
	running := c.waitFor(first.ID, 5*time.Second, func(s string) bool { return s == store.StatusRunning })
	require.Equal(t, "w-silent", deref(running.Worker))
	c.worker(worker.Config{ID: "w-alive", HeartbeatInterval: 100 * time.Millisecond})

	got := c.wait(first.ID, 5*time.Second)
	assert.Equal(t, store.StatusAbandoned, got.Status)
	assert.Contains(t, deref(got.StatusReason), "worker w-silent lost")
	after := c.wait(next.ID, 10*time.Second)
	assert.Equal(t, store.StatusSucceeded, after.Status, "the slot was freed and the next one ran")
	assert.Equal(t, "w-alive", deref(after.Worker))
	assert.Equal(t, store.WorkerInactive, workerStatus(t, c, "w-silent"))

	require.Eventually(t, func() bool { return obs.rejected.Load() == 1 }, 5*time.Second, 20*time.Millisecond,
		"the silent worker's result arrives after its sleep and is rejected")
	again, err := c.st.GetExecution(context.Background(), first.ID)
	require.NoError(t, err)
	assert.Equal(t, store.StatusAbandoned, again.Status, "the late result did not overwrite abandoned")
	assert.Equal(t, 1, completions(t, c, first.ID))
	assert.Zero(t, obs.finished.Load())
}

func TestWorkerThatNeverPicksUpIsTimedOut(t *testing.T) {
	c := newCluster(t)
	limitedSleep(c)
	c.executor(func(cfg *executor.Config) { cfg.ScheduledTimeout = time.Second })
	deafWorker(t, c, "w-deaf") // registered, fresh heartbeat, not consuming
	first := c.run("t.slow", map[string]any{"seconds": 0})
	next := c.run("t.slow", map[string]any{"seconds": 0})

	got := c.wait(first.ID, 10*time.Second)
	assert.Equal(t, store.StatusFailed, got.Status)
	assert.Equal(t, "worker did not pick up the execution", deref(got.StatusReason))
	assert.Equal(t, "w-deaf", deref(got.Worker))
	// The slot was freed: the next one was admitted, dispatched, and timed out too.
	after := c.wait(next.ID, 10*time.Second)
	assert.Equal(t, store.StatusFailed, after.Status)
	require.NotNil(t, after.AdmittedAt)
	assert.False(t, after.AdmittedAt.Before(*got.FinishedAt), "admitted only when the first one's slot was freed")
	st := stats(t, c, "t.slow")
	assert.Zero(t, st.ActiveCount)
	assert.Zero(t, st.QueueLength)
}

func TestNoEligibleWorkerForRuntimeFailsFast(t *testing.T) {
	c := newCluster(t)
	c.action(store.Action{Ref: "t.py", Name: "py", Runtime: "python", Entrypoint: c.script("hello.py", "print('{}')\n")})
	c.worker(worker.Config{ID: "w-builtin", Runtimes: []string{"builtin", "shell"}})
	c.worker(worker.Config{ID: "w-python", Runtimes: []string{"builtin", "python"}})
	_, err := c.st.SetWorkerStatus(context.Background(), "w-python", store.WorkerCordoned)
	require.NoError(t, err)
	c.executor() // waits 500 ms for a worker

	start := time.Now()
	got := c.wait(c.run("t.py", nil).ID, 5*time.Second)
	assert.Equal(t, store.StatusFailed, got.Status)
	assert.Equal(t, "no worker available for runtime python", deref(got.StatusReason))
	assert.Less(t, time.Since(start), 3*time.Second, "fails fast, not after a timeout")

	_, err = c.st.SetWorkerStatus(context.Background(), "w-python", store.WorkerActive)
	require.NoError(t, err)
	ok := c.wait(c.run("t.py", nil).ID, 10*time.Second)
	assert.Equal(t, "w-python", deref(ok.Worker), "uncordoned: eligible again (%s)", deref(ok.StatusReason))
}

func TestRestartedWorkerSettlesWhatItsPreviousProcessRan(t *testing.T) {
	c := newCluster(t)
	c.executor(heartbeat(5 * time.Second)) // the reaper stays out of it
	obs := &countObserver{}
	c.worker(worker.Config{ID: "w-phoenix", Observer: obs})
	e := c.run("core.sleep", map[string]any{"seconds": 2})
	c.waitFor(e.ID, 5*time.Second, func(s string) bool { return s == store.StatusRunning })

	// A new process with the same id (as after a crash and a restart) cannot
	// receive the old one's result: it settles the execution at once.
	c.worker(worker.Config{ID: "w-phoenix"})
	got := c.wait(e.ID, 2*time.Second)
	assert.Equal(t, store.StatusAbandoned, got.Status)
	assert.Contains(t, deref(got.StatusReason), "restarted")
	require.Eventually(t, func() bool { return obs.rejected.Load() == 1 }, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, 1, completions(t, c, e.ID))
	ok := c.wait(c.run("core.noop", nil).ID, 10*time.Second)
	assert.Equal(t, store.StatusSucceeded, ok.Status)
}

// deafWorker registers a worker that declared its queue and heartbeats but
// never consumes.
func deafWorker(t *testing.T, c *cluster, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, c.conn.Declare(ctx, func(ch *amqp.Channel) error {
		return broker.DeclareWorkerQueue(ch, id, int(time.Minute/time.Millisecond))
	}))
	require.NoError(t, c.st.RegisterWorker(ctx, store.Worker{ID: id, Host: "deaf", Runtimes: []string{"builtin"}, Capacity: 4}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
				_, _ = c.st.Heartbeat(ctx, id, 0)
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

func stats(t *testing.T, c *cluster, ref string) store.QueueStats {
	t.Helper()
	qs, err := c.st.QueueStats(context.Background(), ref)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	return qs[0]
}
