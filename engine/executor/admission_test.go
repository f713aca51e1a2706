package executor_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/bench"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

func limitPolicy(limit int, groupBy ...string) store.Policy {
	return store.Policy{Concurrency: store.Concurrency{Limit: &limit, GroupBy: groupBy}}
}

// analyze checks FIFO and the limit from the recorded data of an action.
func analyze(t *testing.T, c *cluster, ref string, limit int) bench.Report {
	t.Helper()
	var execs []bench.Execution
	var before int64
	for {
		items, next, err := c.st.ListExecutions(context.Background(), store.ExecutionFilter{ActionRef: ref, Before: before, Limit: 1000})
		require.NoError(t, err)
		for _, e := range items {
			execs = append(execs, bench.Execution{ID: e.ID, Status: e.Status, GroupKey: e.GroupKey, CreatedAt: e.CreatedAt,
				AdmittedAt: e.AdmittedAt, StartedAt: e.StartedAt, FinishedAt: e.FinishedAt})
		}
		if next == 0 {
			break
		}
		before = next
	}
	return bench.Analyze(execs, limit, 1, ref)
}

func TestTwoExecutorReplicasKeepFIFOAndLimitsPerGroup(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.executor()
	c.worker(worker.Config{Capacity: 8})
	c.worker(worker.Config{Capacity: 8})
	c.action(store.Action{Ref: "t.g", Name: "g", Runtime: "builtin", Entrypoint: "sleep", Policy: limitPolicy(2, "host")})
	var ids []int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 5 {
		wg.Go(func() {
			for range 40 {
				seconds := 0.0
				if g == 0 {
					seconds = 0.05 // a slow group
				}
				e := c.run("t.g", map[string]any{"host": fmt.Sprintf("h%d", g), "seconds": seconds})
				mu.Lock()
				ids = append(ids, e.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, id := range ids {
		e := c.wait(id, 90*time.Second)
		require.Equal(t, store.StatusSucceeded, e.Status, deref(e.Error))
	}
	r := analyze(t, c, "t.g", 2)
	assert.Zero(t, r.FIFOViolations, "admission order = request order in every group")
	assert.LessOrEqual(t, r.MaxActiveObserved, 2)
	assert.Zero(t, r.Lost)
	qs, err := c.st.QueueStats(context.Background(), "t.g")
	require.NoError(t, err)
	require.Len(t, qs, 5)
	for _, q := range qs {
		assert.Equal(t, int64(40), q.TotalEnqueued, q.GroupKey)
		assert.Equal(t, int64(40), q.TotalCompleted, q.GroupKey)
		assert.Zero(t, q.ActiveCount)
		assert.Zero(t, q.QueueLength)
	}
}

func TestThousandAtLimitFiveThroughThePipeline(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.executor()
	c.worker(worker.Config{Capacity: 16})
	c.action(store.Action{Ref: "t.five", Name: "five", Runtime: "builtin", Entrypoint: "noop", Policy: limitPolicy(5)})
	var ids []int64
	for range 1000 {
		ids = append(ids, c.run("t.five", nil).ID)
	}
	// queue_stats converge to the truth while work flows: sample them.
	for _, id := range ids {
		c.wait(id, 120*time.Second)
		if id%100 == 0 {
			s, err := c.st.QueueStats(context.Background(), "t.five")
			require.NoError(t, err)
			assert.LessOrEqual(t, s[0].ActiveCount, 5)
			counts, err := c.st.CountByStatus(context.Background())
			require.NoError(t, err)
			waiting := counts[store.StatusQueued] + counts[store.StatusRequested] + counts[store.StatusScheduling]
			assert.LessOrEqual(t, int64(s[0].QueueLength), waiting, "queued entries are executions still waiting")
		}
	}
	r := analyze(t, c, "t.five", 5)
	assert.Zero(t, r.FIFOViolations)
	assert.LessOrEqual(t, r.MaxActiveObserved, 5)
	assert.Zero(t, r.Lost)
	assert.Zero(t, r.Failed)
	s, err := c.st.QueueStats(context.Background(), "t.five")
	require.NoError(t, err)
	assert.Equal(t, int64(1000), s[0].TotalEnqueued)
	assert.Equal(t, int64(1000), s[0].TotalCompleted)
}

func TestIndependentQueuesPerAction(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 8})
	refs := []string{"t.a", "t.b", "t.c"}
	for _, r := range refs {
		c.action(store.Action{Ref: r, Name: r[2:], Runtime: "builtin", Entrypoint: "noop", Policy: limitPolicy(1)})
	}
	var ids []int64
	for range 50 {
		for _, r := range refs {
			ids = append(ids, c.run(r, nil).ID)
		}
	}
	for _, id := range ids {
		require.Equal(t, store.StatusSucceeded, c.wait(id, 60*time.Second).Status)
	}
	for _, r := range refs {
		rep := analyze(t, c, r, 1)
		assert.Zero(t, rep.FIFOViolations, r)
		assert.Equal(t, 1, rep.MaxActiveObserved, r)
	}
}

func TestQueueTimeoutCancelsWaitingExecutions(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 4})
	timeout := 1
	p := limitPolicy(1)
	p.QueueTimeout = &timeout
	c.action(store.Action{Ref: "t.qt", Name: "qt", Runtime: "builtin", Entrypoint: "sleep", Policy: p})
	long := c.run("t.qt", map[string]any{"seconds": 3})
	waiting := c.run("t.qt", map[string]any{"seconds": 0})
	e := c.wait(waiting.ID, 20*time.Second)
	assert.Equal(t, store.StatusCancelled, e.Status)
	assert.Equal(t, "queue timeout", deref(e.StatusReason))
	assert.Equal(t, store.StatusSucceeded, c.wait(long.ID, 20*time.Second).Status, "the running one is not affected")
}

func TestRateLimitAdmitsInOrderAtTheRate(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 8})
	p := store.Policy{RateLimit: &store.RateLimit{Max: 2, Window: 1}}
	c.action(store.Action{Ref: "t.rate", Name: "rate", Runtime: "builtin", Entrypoint: "noop", Policy: p})
	var ids []int64
	for range 6 {
		ids = append(ids, c.run("t.rate", nil).ID)
	}
	var admitted []time.Time
	for _, id := range ids {
		e := c.wait(id, 30*time.Second)
		require.Equal(t, store.StatusSucceeded, e.Status)
		admitted = append(admitted, *e.AdmittedAt)
	}
	assert.True(t, slices.IsSortedFunc(admitted, func(a, b time.Time) int { return a.Compare(b) }), "admitted in request order")
	// 6 at 2 per second: the last is admitted at least 2 windows after the first.
	assert.GreaterOrEqual(t, admitted[5].Sub(admitted[0]), 1900*time.Millisecond)
	// Fixed windows opening at the first admission: execution i cannot be
	// admitted before window i/2 opens.
	for i := range admitted {
		earliest := time.Duration(i/2) * time.Second
		assert.GreaterOrEqual(t, admitted[i].Sub(admitted[0]), earliest-20*time.Millisecond, "execution %d admitted too early: never more than 2 in a window", i)
	}
}

func TestPauseResumeKeepsOrderAndRaisingLimitWakesHeads(t *testing.T) {
	c := newCluster(t)
	c.executor()
	c.worker(worker.Config{Capacity: 8})
	c.action(store.Action{Ref: "t.pr", Name: "pr", Runtime: "builtin", Entrypoint: "noop", Policy: limitPolicy(1)})
	ctx := context.Background()
	_, err := c.svc.SetPaused(ctx, "t.pr", true)
	require.NoError(t, err)
	var ids []int64
	for range 5 {
		ids = append(ids, c.run("t.pr", nil).ID)
	}
	for _, id := range ids {
		c.waitFor(id, 10*time.Second, func(s string) bool { return s == store.StatusQueued })
	}
	_, err = c.svc.SetPaused(ctx, "t.pr", false)
	require.NoError(t, err)
	lim := 3
	_, err = c.svc.SetPolicy(ctx, "t.pr", store.Policy{Concurrency: store.Concurrency{Limit: &lim}})
	require.NoError(t, err)
	for _, id := range ids {
		require.Equal(t, store.StatusSucceeded, c.wait(id, 20*time.Second).Status)
	}
	r := analyze(t, c, "t.pr", 3)
	assert.Zero(t, r.FIFOViolations)
}
