package executor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

// countingAction registers a shell action that appends its execution id to
// a file each time it actually runs.
func countingAction(c *cluster, t *testing.T) string {
	log := filepath.Join(t.TempDir(), "runs.log")
	c.action(store.Action{Ref: "t.count", Name: "count", Runtime: "shell",
		Entrypoint: c.script("count.sh", `echo "$ATTUNE_EXECUTION_ID" >> `+log+"\necho '{}'\n")})
	return log
}

func runsPerExecution(t *testing.T, log string) map[string]int {
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	out := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		out[l]++
	}
	return out
}

func completions(t *testing.T, c *cluster, id int64) int {
	e, err := c.st.GetExecution(context.Background(), id)
	require.NoError(t, err)
	n := 0
	for _, tr := range e.Timeline {
		if store.IsFinal(tr.To) {
			n++
		}
	}
	return n
}

func TestTwoExecutorsDispatchEachExecutionOnce(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.executor()
	c.worker(worker.Config{Capacity: 8})
	c.worker(worker.Config{Capacity: 8})
	log := countingAction(c, t)
	var ids []int64
	for range 60 {
		ids = append(ids, c.run("t.count", nil).ID)
	}
	for _, id := range ids {
		e := c.wait(id, 60*time.Second)
		require.Equal(t, store.StatusSucceeded, e.Status, deref(e.Error))
		assert.Equal(t, 1, completions(t, c, id))
		sched := 0
		for _, tr := range mustGet(t, c, id).Timeline {
			if tr.To == store.StatusScheduled {
				sched++
			}
		}
		assert.Equal(t, 1, sched, "execution %d dispatched once", id)
	}
	runs := runsPerExecution(t, log)
	assert.Len(t, runs, len(ids))
	for id, n := range runs {
		assert.Equal(t, 1, n, "execution %s ran %d times", id, n)
	}
}

func mustGet(t *testing.T, c *cluster, id int64) store.Execution {
	e, err := c.st.GetExecution(context.Background(), id)
	require.NoError(t, err)
	return e
}

func TestDuplicateMessagesNeverRunOrCompleteTwice(t *testing.T) {
	c := newCluster(t)
	c.executor()
	w := c.worker(worker.Config{Capacity: 4})
	log := countingAction(c, t)
	ctx := context.Background()
	e := c.run("t.count", nil)
	done := c.wait(e.ID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, done.Status)

	// Replay every kind of message for the finished execution, twice.
	for range 2 {
		require.NoError(t, messages.PublishRequested(ctx, c.pub, e.ID))
		require.NoError(t, messages.PublishDispatch(ctx, c.pub, messages.ExecutionDispatch{ExecutionID: e.ID, WorkerID: w.ID(), Attempt: 1}))
		require.NoError(t, messages.PublishCompleted(ctx, c.pub, messages.ExecutionCompleted{ExecutionID: e.ID, Status: "succeeded", WorkerID: w.ID(), Attempt: 1}))
	}
	// A fresh execution after the duplicates proves they were all consumed.
	after := c.wait(c.run("t.count", nil).ID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, after.Status)
	assert.Equal(t, 1, completions(t, c, e.ID))
	assert.Equal(t, map[string]int{itoa(e.ID): 1, itoa(after.ID): 1}, runsPerExecution(t, log))
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestLostRequestedMessageIsRedriven(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 2})
	// Record the execution without publishing, as if the process died
	// between commit and publish.
	id, _, err := c.st.RequestExecution(context.Background(), store.Request{ActionRef: "core.noop", MaxQueueLength: 100})
	require.NoError(t, err)
	e := c.wait(id, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, e.Status)
}

func TestLostWakeUpAfterReleaseIsRedriven(t *testing.T) {
	c := newCluster(t)
	c.executor()
	w := c.worker(worker.Config{Capacity: 2})
	one := 1
	c.action(store.Action{Ref: "t.one", Name: "one", Runtime: "builtin", Entrypoint: "noop",
		Policy: store.Policy{Concurrency: store.Concurrency{Limit: &one}}})
	ctx := context.Background()
	// Two executions; drive the first by hand so the second waits queued.
	first, _, err := c.st.RequestExecution(ctx, store.Request{ActionRef: "t.one", MaxQueueLength: 100})
	require.NoError(t, err)
	second := c.run("t.one", nil)
	c.waitFor(second.ID, 10*time.Second, func(s string) bool { return s == store.StatusQueued })
	_, _, err = c.st.ClaimForScheduling(ctx, first)
	require.NoError(t, err)
	_, ok, err := c.st.MarkScheduled(ctx, first, w.ID())
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = c.st.StartRun(ctx, first, w.ID(), 1)
	require.NoError(t, err)
	require.True(t, ok)
	// Release the slot and "crash" before publishing the wake-up.
	fin, adm, err := c.st.Finish(ctx, first, []string{store.StatusRunning}, &store.Fence{WorkerID: w.ID(), Attempt: 1},
		store.Outcome{Status: store.StatusSucceeded, Reason: "done"})
	require.NoError(t, err)
	require.True(t, fin)
	require.Equal(t, []int64{second.ID}, adm.Woken)
	e := c.wait(second.ID, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, e.Status, "the re-driver woke the promoted head")
	s, err := c.st.QueueStats(ctx, "t.one")
	require.NoError(t, err)
	assert.Equal(t, 0, s[0].ActiveCount, "no slot leaked")
	assert.Equal(t, int64(2), s[0].TotalCompleted)
}

func TestCrashAfterClaimBeforeDispatchIsRedriven(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	id, _, err := c.st.RequestExecution(ctx, store.Request{ActionRef: "core.noop", MaxQueueLength: 100})
	require.NoError(t, err)
	// An executor claimed it and died before publishing the dispatch.
	_, ok, err := c.st.ClaimForScheduling(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	c.executor()
	c.worker(worker.Config{Capacity: 2})
	e := c.wait(id, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, e.Status)
	assert.Equal(t, 1, completions(t, c, id))
}

func TestNoWorkerForRuntimeFailsWithReason(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 2, Runtimes: []string{"builtin"}})
	c.action(store.Action{Ref: "t.py", Name: "py", Runtime: "python", Entrypoint: c.script("x.py", "print(1)\n")})
	e := c.wait(c.run("t.py", nil).ID, 20*time.Second)
	assert.Equal(t, store.StatusFailed, e.Status)
	assert.Equal(t, "no worker available for runtime python", deref(e.Error))
}

func TestGarbageMessagesAreDeadLetteredAndWorkContinues(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 2})
	ctx := context.Background()
	for _, key := range []string{broker.KeyExecutionRequested, broker.KeyExecutionCompleted} {
		require.NoError(t, c.pub.Publish(ctx, broker.ExchangeExecutions, key, broker.Message{Type: "", Body: []byte("not json"), Mandatory: true}))
		require.NoError(t, c.pub.Publish(ctx, broker.ExchangeExecutions, key, broker.Message{Type: "bogus.type", Body: []byte(`{}`), Mandatory: true}))
	}
	e := c.wait(c.run("core.noop", nil).ID, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, e.Status)
	// Four rejected messages arrive in the dead-letter queue, where the
	// executor's dead-letter handler records them.
	c.deadLetters(store.DeadLetterFilter{Reason: "rejected"}, 4, 10*time.Second)
}
