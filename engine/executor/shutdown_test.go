package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

// Graceful shutdown, drain, cordon and uncordon of workers (issue 5,
// scenario 4 and the worker statuses of engine/worker/doc.go).

// workerCacheAge is how long an executor may still pick a worker after it
// stopped being eligible (the age of its worker cache).
const workerCacheAge = 1200 * time.Millisecond

func isRunning(s string) bool { return s == store.StatusRunning }

// runAllOn runs n no-ops and checks that each ran on the worker want.
func runAllOn(t *testing.T, c *cluster, n int, want string) {
	t.Helper()
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = c.run("core.noop", nil).ID
	}
	for _, id := range ids {
		got := c.wait(id, 10*time.Second)
		assert.Equal(t, store.StatusSucceeded, got.Status)
		assert.Equal(t, want, deref(got.Worker), "execution %d", id)
	}
}

func TestGracefulStopFinishesInFlightAndTakesNoNewWork(t *testing.T) {
	c := newCluster(t)
	c.executor(heartbeat(300 * time.Millisecond))
	stopping := c.worker(worker.Config{ID: "w-stopping", ShutdownTimeout: 10 * time.Second,
		StopGrace: 200 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
	inflight := c.run("core.sleep", map[string]any{"seconds": 3})
	c.waitFor(inflight.ID, 5*time.Second, isRunning)
	c.worker(worker.Config{ID: "w-other", HeartbeatInterval: 100 * time.Millisecond})

	stopped := make(chan struct{})
	go func() { stopping.Stop(context.Background()); close(stopped) }()
	require.Eventually(t, func() bool { return workerStatus(t, c, "w-stopping") == store.WorkerDraining },
		2*time.Second, 10*time.Millisecond)
	time.Sleep(workerCacheAge)
	runAllOn(t, c, 5, "w-other")

	got := c.wait(inflight.ID, 10*time.Second)
	assert.Equal(t, store.StatusSucceeded, got.Status, "in-flight work finishes (%s)", deref(got.StatusReason))
	assert.Equal(t, "w-stopping", deref(got.Worker))
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	assert.Equal(t, store.WorkerInactive, workerStatus(t, c, "w-stopping"))
}

func TestShutdownTimeoutCancelsTheRestWithAReason(t *testing.T) {
	c := newCluster(t)
	c.executor()
	w := c.worker(worker.Config{ID: "w-impatient", ShutdownTimeout: 300 * time.Millisecond})
	e := c.run("core.sleep", map[string]any{"seconds": 30})
	c.waitFor(e.ID, 5*time.Second, isRunning)
	w.Stop(context.Background())
	got := c.wait(e.ID, 5*time.Second)
	assert.Equal(t, store.StatusCancelled, got.Status)
	assert.Contains(t, deref(got.StatusReason), "worker shutting down")
	assert.Equal(t, store.WorkerInactive, workerStatus(t, c, "w-impatient"))
}

// dispatchBehindLongRun leaves a sleeping execution running on a
// one-slot worker and a no-op scheduled behind it, in its queue.
func dispatchBehindLongRun(t *testing.T, c *cluster, id string) (*worker.Worker, int64, int64) {
	t.Helper()
	w := c.worker(worker.Config{ID: id, Capacity: 1, ShutdownTimeout: 10 * time.Second,
		StopGrace: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond})
	long := c.run("core.sleep", map[string]any{"seconds": 1.5})
	c.waitFor(long.ID, 5*time.Second, isRunning)
	queued := c.run("core.noop", nil)
	e := c.waitFor(queued.ID, 5*time.Second, func(s string) bool { return s == store.StatusScheduled })
	require.Equal(t, id, deref(e.Worker))
	return w, long.ID, queued.ID
}

func TestDispatchInQueueAtShutdownRunsWhenTheSameWorkerReturns(t *testing.T) {
	c := newCluster(t)
	c.executor(heartbeat(5 * time.Second)) // the reaper stays out of it
	w, long, queued := dispatchBehindLongRun(t, c, "w-back")
	w.Stop(context.Background())
	assert.Equal(t, store.StatusSucceeded, c.wait(long, time.Second).Status)
	e, err := c.st.GetExecution(context.Background(), queued)
	require.NoError(t, err)
	assert.Equal(t, store.StatusScheduled, e.Status, "still waiting in the durable queue, not lost or failed")
	assert.Equal(t, store.WorkerInactive, workerStatus(t, c, "w-back"))

	c.worker(worker.Config{ID: "w-back"})
	got := c.wait(queued, 10*time.Second)
	assert.Equal(t, store.StatusSucceeded, got.Status)
	assert.Equal(t, "w-back", deref(got.Worker))
}

func TestDispatchInQueueAtShutdownGoesToAnotherWorkerAfterThreeHeartbeats(t *testing.T) {
	c := newCluster(t)
	c.executor(heartbeat(300 * time.Millisecond))
	w, long, queued := dispatchBehindLongRun(t, c, "w-gone")
	c.worker(worker.Config{ID: "w-next", HeartbeatInterval: 100 * time.Millisecond})
	w.Stop(context.Background())
	assert.Equal(t, store.StatusSucceeded, c.wait(long, time.Second).Status)
	got := c.wait(queued, 10*time.Second)
	assert.Equal(t, store.StatusSucceeded, got.Status)
	assert.Equal(t, "w-next", deref(got.Worker), "the reaper handed it to another worker")
}

func TestCordonDrainUncordon(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	c.executor(heartbeat(300 * time.Millisecond))
	cfg := worker.Config{ID: "w-ops", HeartbeatInterval: 100 * time.Millisecond}
	ops := c.worker(cfg)
	set := func(id, status, want string) {
		t.Helper()
		w, err := c.st.SetWorkerStatus(ctx, id, status)
		require.NoError(t, err)
		require.Equal(t, want, w.Status)
	}
	// Heartbeats come and go; the status stays what the operator set.
	holds := func(want string) {
		t.Helper()
		time.Sleep(workerCacheAge)
		assert.Equal(t, want, workerStatus(t, c, "w-ops"))
	}

	// Cordon: keeps running what it has, gets nothing new.
	first := c.run("core.sleep", map[string]any{"seconds": 1.5})
	c.waitFor(first.ID, 5*time.Second, isRunning)
	c.worker(worker.Config{ID: "w-spare", HeartbeatInterval: 100 * time.Millisecond})
	set("w-ops", store.WorkerCordoned, store.WorkerCordoned)
	holds(store.WorkerCordoned)
	runAllOn(t, c, 4, "w-spare")
	assert.Equal(t, store.StatusSucceeded, c.wait(first.ID, 5*time.Second).Status)
	assert.Equal(t, store.WorkerCordoned, workerStatus(t, c, "w-ops"), "a cordon does not end by itself")

	// Drain: finishes in-flight work, then shows drained.
	set("w-ops", store.WorkerActive, store.WorkerActive)
	set("w-spare", store.WorkerCordoned, store.WorkerCordoned)
	time.Sleep(workerCacheAge)
	second := c.run("core.sleep", map[string]any{"seconds": 1.5})
	e := c.waitFor(second.ID, 5*time.Second, isRunning)
	require.Equal(t, "w-ops", deref(e.Worker))
	set("w-ops", store.WorkerDraining, store.WorkerDraining)
	assert.Equal(t, store.WorkerDraining, workerStatus(t, c, "w-ops"), "still running: still draining")
	assert.Equal(t, store.StatusSucceeded, c.wait(second.ID, 5*time.Second).Status)
	require.Eventually(t, func() bool { return workerStatus(t, c, "w-ops") == store.WorkerDrained },
		2*time.Second, 20*time.Millisecond)
	holds(store.WorkerDrained)
	set("w-ops", store.WorkerDraining, store.WorkerDrained) // draining again changes nothing

	// Restarts keep the operator's decision; only uncordon undoes it.
	ops.Stop(ctx)
	assert.Equal(t, store.WorkerDrained, workerStatus(t, c, "w-ops"))
	ops = c.worker(cfg)
	assert.Equal(t, store.WorkerDrained, ops.Status())
	set("w-ops", store.WorkerCordoned, store.WorkerCordoned)
	ops.Stop(ctx)
	ops = c.worker(cfg)
	assert.Equal(t, store.WorkerCordoned, ops.Status())
	holds(store.WorkerCordoned)
	set("w-ops", store.WorkerActive, store.WorkerActive)
	runAllOn(t, c, 2, "w-ops")

	// An operator's status on a stopped worker: uncordon does not revive it,
	// drain keeps it out when it comes back.
	ops.Stop(ctx)
	set("w-ops", store.WorkerActive, store.WorkerInactive)
	set("w-ops", store.WorkerDraining, store.WorkerDrained)
	_, err := c.st.SetWorkerStatus(ctx, "w-nobody", store.WorkerCordoned)
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = c.st.SetWorkerStatus(ctx, "w-ops", store.WorkerInactive)
	assert.Error(t, err, "inactive is not an operator's status")
}
