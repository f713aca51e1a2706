package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

// retryJSON is a retry policy with short backoffs for tests.
func retryJSON(maxRetries int, initial float64, on ...string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"max_retries": maxRetries, "retry_on": on,
		"backoff": map[string]any{"initial": initial, "max": 1, "multiplier": 2}})
	return b
}

// chain follows retry_of links from id until the last attempt, waiting
// within for each successor to finish; it stops when an attempt has no
// successor within settle of finishing.
func (c *cluster) chain(id int64, within, settle time.Duration) []store.Execution {
	c.t.Helper()
	var out []store.Execution
	for {
		e := c.wait(id, within)
		out = append(out, e)
		next, ok := c.successor(id, settle)
		if !ok {
			return out
		}
		id = next
	}
}

func (c *cluster) successor(id int64, within time.Duration) (int64, bool) {
	deadline := time.Now().Add(within)
	for {
		next, err := c.st.SuccessorOf(context.Background(), id)
		if err == nil {
			return next, true
		}
		require.True(c.t, errors.Is(err, store.ErrNotFound), "successor of %d: %v", id, err)
		if time.Now().After(deadline) {
			return 0, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(t *testing.T, c *cluster, ref string) int {
	items, _, err := c.st.ListExecutions(context.Background(), store.ExecutionFilter{ActionRef: ref, Limit: 1000})
	require.NoError(t, err)
	return len(items)
}

func TestFailingActionIsRetriedMaxRetriesTimesThenStops(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	c.action(store.Action{Ref: "t.fail", Name: "fail", Runtime: "shell", Entrypoint: c.script("fail.sh", "echo no >&2; exit 1\n"),
		Retry: retryJSON(2, 0.05, "failed")})
	first := c.run("t.fail", map[string]any{"n": 1})
	attempts := c.chain(first.ID, 20*time.Second, 2*time.Second)
	require.Len(t, attempts, 3, "the first attempt and two retries")
	for i, e := range attempts {
		assert.Equal(t, store.StatusFailed, e.Status)
		assert.Equal(t, i+1, e.Attempt)
		assert.JSONEq(t, `{"n": 1}`, string(e.Parameters))
		if i > 0 {
			require.NotNil(t, e.RetryOf)
			assert.Equal(t, attempts[i-1].ID, *e.RetryOf)
			assert.True(t, !e.CreatedAt.Before(*attempts[i-1].FinishedAt), "a retry is requested after its predecessor ended")
		}
	}
	assert.Equal(t, 3, count(t, c, "t.fail"), "no fourth attempt")
}

func TestFlakyActionSucceedsOnRetry(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	marker := filepath.Join(t.TempDir(), "tried")
	c.action(store.Action{Ref: "t.flaky", Name: "flaky", Runtime: "shell", Entrypoint: c.script("flaky.sh",
		`if [ -f `+marker+` ]; then echo '{"ok": true}'; else touch `+marker+`; echo first try >&2; exit 1; fi`+"\n"),
		Retry: retryJSON(3, 0.05, "failed", "timeout")})
	attempts := c.chain(c.run("t.flaky", nil).ID, 20*time.Second, time.Second)
	require.Len(t, attempts, 2)
	assert.Equal(t, store.StatusFailed, attempts[0].Status)
	assert.Equal(t, store.StatusSucceeded, attempts[1].Status)
	assert.Equal(t, true, resultOf(t, attempts[1])["ok"])
}

func TestDuplicateCompletionsAndTwoExecutorsCreateOneRetry(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	c.action(store.Action{Ref: "t.fail", Name: "fail", Runtime: "shell", Entrypoint: c.script("fail.sh", "exit 2\n"),
		Retry: retryJSON(1, 0.5, "failed")})
	ctx := context.Background()
	first := c.wait(c.run("t.fail", nil).ID, 20*time.Second)
	require.Equal(t, store.StatusFailed, first.Status)
	// While the retry waits out its backoff, the completion arrives again
	// and again, at both executors.
	for range 10 {
		require.NoError(t, messages.PublishCompleted(ctx, c.pub, messages.ExecutionCompleted{ExecutionID: first.ID,
			Status: store.StatusFailed, WorkerID: deref(first.Worker), Attempt: 1}))
	}
	attempts := c.chain(first.ID, 20*time.Second, 2*time.Second)
	require.Len(t, attempts, 2)
	for range 5 {
		require.NoError(t, messages.PublishCompleted(ctx, c.pub, messages.ExecutionCompleted{ExecutionID: attempts[1].ID,
			Status: store.StatusFailed, Attempt: 2}))
	}
	time.Sleep(time.Second)
	assert.Equal(t, 2, count(t, c, "t.fail"), "one retry, and none after max_retries")
}

func TestPlannedRetrySurvivesExecutorCrash(t *testing.T) {
	c := newCluster(t)
	first := c.executor()
	c.worker(worker.Config{Capacity: 4})
	marker := filepath.Join(t.TempDir(), "tried")
	c.action(store.Action{Ref: "t.flaky", Name: "flaky", Runtime: "shell", Entrypoint: c.script("flaky.sh",
		`if [ -f `+marker+` ]; then echo '{}'; else touch `+marker+`; exit 1; fi`+"\n"),
		Retry: retryJSON(1, 1, "failed")})
	e := c.wait(c.run("t.flaky", nil).ID, 20*time.Second)
	require.Equal(t, store.StatusFailed, e.Status)
	require.Eventually(t, func() bool {
		f, err := c.st.GetFinished(context.Background(), e.ID)
		return err == nil && f.RetryState == store.RetryPending
	}, 10*time.Second, 10*time.Millisecond)
	first.Stop() // its backoff timer dies with it; the plan is in the database
	_, ok := c.successor(e.ID, 1500*time.Millisecond)
	require.False(t, ok, "nobody requests the retry while no executor runs")
	c.executor()
	attempts := c.chain(e.ID, 20*time.Second, time.Second)
	require.Len(t, attempts, 2)
	assert.Equal(t, store.StatusSucceeded, attempts[1].Status)
}

func TestLostWorkerIsRetriedOnAnotherWorker(t *testing.T) {
	c := newCluster(t)
	ex := c.executor(noRedrive)
	c.action(store.Action{Ref: "t.noop", Name: "noop", Runtime: "builtin", Entrypoint: "noop",
		Retry: retryJSON(1, 0.05, "worker_lost")})
	stop := c.hungWorker("ghost", time.Minute)
	ctx := context.Background()
	e := c.run("t.noop", nil)
	c.waitFor(e.ID, 10*time.Second, func(s string) bool { return s == store.StatusScheduled })
	// The ghost starts it, then dies.
	_, ok, err := c.st.StartRun(ctx, e.ID, "ghost", 1)
	require.NoError(t, err)
	require.True(t, ok)
	stop()
	c.worker(worker.Config{Capacity: 2})
	// What the dead-worker reaper does once the heartbeat is stale.
	_, err = c.st.MarkWorkerStopped(ctx, "ghost")
	require.NoError(t, err)
	require.NoError(t, ex.ReleaseWorker(ctx, "ghost", "worker ghost lost (test)"))
	attempts := c.chain(e.ID, 20*time.Second, time.Second)
	require.Len(t, attempts, 2)
	assert.Equal(t, store.StatusAbandoned, attempts[0].Status)
	assert.Equal(t, store.StatusSucceeded, attempts[1].Status)
	assert.NotEqual(t, "ghost", deref(attempts[1].Worker))
}

func TestExpiredDispatchIsRetriedWithQueueExpiredPolicy(t *testing.T) {
	c := newCluster(t)
	c.executor(noRedrive)
	c.action(store.Action{Ref: "t.noop", Name: "noop", Runtime: "builtin", Entrypoint: "noop",
		Retry: retryJSON(1, 0.8, "queue_expired")})
	stop := c.hungWorker("hung-r", 300*time.Millisecond)
	e := c.wait(c.run("t.noop", nil).ID, 20*time.Second)
	require.Equal(t, store.StatusFailed, e.Status)
	assert.Equal(t, executor.ReasonExpiredInQueue, deref(e.StatusReason))
	// Before the backoff ends the hung worker is gone and a live one is up.
	stop()
	_, err := c.st.MarkWorkerStopped(context.Background(), "hung-r")
	require.NoError(t, err)
	c.worker(worker.Config{Capacity: 2})
	attempts := c.chain(e.ID, 20*time.Second, time.Second)
	require.Len(t, attempts, 2)
	assert.Equal(t, store.StatusSucceeded, attempts[1].Status)
	assert.NotEqual(t, "hung-r", deref(attempts[1].Worker))
}

func TestLostCompletionIsStillRetried(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	c.action(store.Action{Ref: "t.noop", Name: "noop", Runtime: "builtin", Entrypoint: "noop", Retry: retryJSON(1, 0.05, "failed")})
	require.NoError(t, c.st.RegisterWorker(ctx, store.Worker{ID: "gone", Host: "h", Runtimes: []string{"builtin"}, Capacity: 1}))
	// A worker ran and failed the execution, then died before publishing
	// execution.completed.
	id, _, err := c.st.RequestExecution(ctx, store.Request{ActionRef: "t.noop", MaxQueueLength: 100})
	require.NoError(t, err)
	_, ok, err := c.st.ClaimForScheduling(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = c.st.MarkScheduled(ctx, id, "gone")
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = c.st.StartRun(ctx, id, "gone", 1)
	require.NoError(t, err)
	require.True(t, ok)
	msg := "exit code 1"
	fin, _, err := c.st.Finish(ctx, id, []string{store.StatusRunning}, &store.Fence{WorkerID: "gone", Attempt: 1},
		store.Outcome{Status: store.StatusFailed, Reason: msg, Error: &msg})
	require.NoError(t, err)
	require.True(t, fin)
	_, err = c.st.MarkWorkerStopped(ctx, "gone")
	require.NoError(t, err)
	c.executor()
	c.worker(worker.Config{Capacity: 2})
	next, ok := c.successor(id, 20*time.Second)
	require.True(t, ok, "the recovery loop decided the retry")
	retry := c.wait(next, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, retry.Status)
	assert.Equal(t, 2, retry.Attempt)
}
