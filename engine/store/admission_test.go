package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/engine/store"
)

func intp(v int) *int { return &v }

func registerAction(t *testing.T, st *store.Store, ref string, p store.Policy) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, st.UpsertPack(ctx, store.Pack{Ref: "t"}))
	_, err := st.UpsertAction(ctx, store.Action{Ref: ref, Pack: "t", Name: ref, Runtime: "builtin", Entrypoint: "noop", Policy: p})
	require.NoError(t, err)
}

func request(t *testing.T, st *store.Store, ref, group string) int64 {
	t.Helper()
	id, _, err := st.RequestExecution(context.Background(), store.Request{ActionRef: ref, GroupKey: group, MaxQueueLength: 100000})
	require.NoError(t, err)
	return id
}

// activeIDs returns the executions holding a slot, in admission order.
func admittedOrder(t *testing.T, st *store.Store, ref string) []int64 {
	t.Helper()
	var out []int64
	var before int64
	for {
		items, next, err := st.ListExecutions(context.Background(), store.ExecutionFilter{ActionRef: ref, Before: before, Limit: 1000})
		require.NoError(t, err)
		for _, e := range items {
			if e.AdmittedAt != nil {
				out = append(out, e.ID)
			}
		}
		if next == 0 {
			break
		}
		before = next
	}
	// ListExecutions is newest first; sort by admitted_at via a fresh read.
	type pair struct {
		id int64
		at int64
	}
	ps := make([]pair, 0, len(out))
	for _, id := range out {
		e, err := st.GetExecution(context.Background(), id)
		require.NoError(t, err)
		ps = append(ps, pair{id, e.AdmittedAt.UnixNano()})
	}
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].at < ps[j-1].at; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	ids := make([]int64, len(ps))
	for i, p := range ps {
		ids[i] = p.id
	}
	return ids
}

// finish completes an admitted execution the way a worker would.
func finish(t *testing.T, st *store.Store, id int64) store.Admission {
	t.Helper()
	ctx := context.Background()
	c, ok, err := st.ClaimForScheduling(ctx, id)
	require.NoError(t, err)
	if ok {
		_, ok, err = st.MarkScheduled(ctx, c.ID, "w1")
		require.NoError(t, err)
		require.True(t, ok)
	}
	_, ok, err = st.StartRun(ctx, id, "w1", 1)
	require.NoError(t, err)
	require.True(t, ok, "execution %d should start", id)
	fin, adm, err := st.Finish(ctx, id, []string{store.StatusRunning}, &store.Fence{WorkerID: "w1", Attempt: 1},
		store.Outcome{Status: store.StatusSucceeded, Reason: "ok", Result: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.True(t, fin)
	return adm
}

func stats(t *testing.T, st *store.Store, ref string) store.QueueStats {
	t.Helper()
	qs, err := st.QueueStats(context.Background(), ref)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	return qs[0]
}

func TestLimitOneKeepsRequestOrder(t *testing.T) {
	st := testenv.Store(t)
	registerAction(t, st, "t.one", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	var ids []int64
	for range 10 {
		ids = append(ids, request(t, st, "t.one", ""))
	}
	s := stats(t, st, "t.one")
	assert.Equal(t, 1, s.ActiveCount)
	assert.Equal(t, 9, s.QueueLength)
	assert.Equal(t, int64(10), s.TotalEnqueued)
	require.NotNil(t, s.OldestEnqueuedAt)

	for i := range ids {
		// Exactly the next id in request order holds the slot.
		assert.Equal(t, ids[:i+1], admittedOrder(t, st, "t.one"))
		finish(t, st, ids[i])
	}
	s = stats(t, st, "t.one")
	assert.Equal(t, 0, s.ActiveCount)
	assert.Equal(t, 0, s.QueueLength)
	assert.Equal(t, int64(10), s.TotalCompleted)
	assert.Nil(t, s.OldestEnqueuedAt)
}

func TestConcurrentRequestsAndCompletionsStayFIFO(t *testing.T) {
	st := testenv.Store(t)
	const n, limit = 1000, 5
	registerAction(t, st, "t.five", store.Policy{Concurrency: store.Concurrency{Limit: intp(limit)}})
	ids := make([]int64, n)
	for i := range n {
		ids[i] = request(t, st, "t.five", "")
	}
	// Complete admitted executions from 8 goroutines at once, as several
	// workers/replicas would, checking the limit after every step.
	var mu sync.Mutex
	done := map[int64]bool{}
	next := 0
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				if next >= n {
					mu.Unlock()
					return
				}
				id := ids[next]
				next++
				mu.Unlock()
				ctx := context.Background()
				// Wait until admitted (promoted by some other goroutine's finish).
				for {
					e, err := st.GetExecution(ctx, id)
					if err != nil {
						errs <- err
						return
					}
					if e.AdmittedAt != nil {
						break
					}
				}
				finish(t, st, id)
				mu.Lock()
				done[id] = true
				mu.Unlock()
				s, err := st.QueueStats(ctx, "t.five")
				if err != nil {
					errs <- err
					return
				}
				if s[0].ActiveCount > limit {
					errs <- errors.New("more than limit active")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, ids, admittedOrder(t, st, "t.five"), "admission order = request order")
	s := stats(t, st, "t.five")
	assert.Equal(t, int64(n), s.TotalEnqueued)
	assert.Equal(t, int64(n), s.TotalCompleted)
	assert.Equal(t, 0, s.ActiveCount)
}

func TestCancelQueuedUpdatesPositions(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.c", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	var ids []int64
	for range 10 {
		ids = append(ids, request(t, st, "t.c", ""))
	}
	// ids[0] runs; queue positions 1..9 are ids[1..9].
	pos, ok, err := st.QueuePosition(ctx, ids[9])
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(9), pos)
	for _, p := range []int{2, 5, 8} { // queue positions 2, 5, 8
		res, err := st.Cancel(ctx, ids[p], "test")
		require.NoError(t, err)
		assert.True(t, res.Cancelled)
	}
	pos, _, err = st.QueuePosition(ctx, ids[9])
	require.NoError(t, err)
	assert.Equal(t, int64(6), pos, "three ahead were cancelled")
	var ran []int64
	for _, id := range ids {
		e, err := st.GetExecution(ctx, id)
		require.NoError(t, err)
		if e.Status == store.StatusCancelled {
			continue
		}
		finish(t, st, id)
		ran = append(ran, id)
	}
	assert.Len(t, ran, 7)
	assert.Equal(t, ran, admittedOrder(t, st, "t.c"))
	_, err = st.Cancel(ctx, ids[0], "again")
	assert.ErrorIs(t, err, store.ErrConflict, "a finished execution cannot be cancelled")
}

func TestQueueFullRefusesTheTwelfth(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.full", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	for range 11 {
		_, _, err := st.RequestExecution(ctx, store.Request{ActionRef: "t.full", MaxQueueLength: 10})
		require.NoError(t, err)
	}
	_, _, err := st.RequestExecution(ctx, store.Request{ActionRef: "t.full", MaxQueueLength: 10})
	require.ErrorIs(t, err, store.ErrQueueFull)
	s := stats(t, st, "t.full")
	assert.Equal(t, 1, s.ActiveCount)
	assert.Equal(t, 10, s.QueueLength)
}

func TestRaisingLimitAdmitsHeadsLoweringAdmitsNothing(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.l", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	var ids []int64
	for range 6 {
		ids = append(ids, request(t, st, "t.l", ""))
	}
	_, err := st.SetPolicy(ctx, "t.l", store.Policy{Concurrency: store.Concurrency{Limit: intp(3)}})
	require.NoError(t, err)
	assert.Equal(t, ids[:3], admittedOrder(t, st, "t.l"))
	_, err = st.SetPolicy(ctx, "t.l", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	require.NoError(t, err)
	finish(t, st, ids[0])
	finish(t, st, ids[1])
	assert.Equal(t, ids[:3], admittedOrder(t, st, "t.l"), "2 still active ≥ … nothing new until below the limit")
	finish(t, st, ids[2])
	assert.Equal(t, ids[:4], admittedOrder(t, st, "t.l"))
}

func TestPauseKeepsOrderResumeAdmits(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.p", store.Policy{Concurrency: store.Concurrency{Limit: intp(2)}})
	_, err := st.SetPaused(ctx, "t.p", true)
	require.NoError(t, err)
	var ids []int64
	for range 5 {
		ids = append(ids, request(t, st, "t.p", ""))
	}
	assert.Empty(t, admittedOrder(t, st, "t.p"), "paused: nothing admitted")
	_, err = st.SetPaused(ctx, "t.p", false)
	require.NoError(t, err)
	assert.Equal(t, ids[:2], admittedOrder(t, st, "t.p"))
}

func TestGroupsHaveTheirOwnQueues(t *testing.T) {
	st := testenv.Store(t)
	registerAction(t, st, "t.g", store.Policy{Concurrency: store.Concurrency{Limit: intp(2), GroupBy: []string{"host"}}})
	a1, a2, a3 := request(t, st, "t.g", `["a"]`), request(t, st, "t.g", `["a"]`), request(t, st, "t.g", `["a"]`)
	b1 := request(t, st, "t.g", `["b"]`)
	order := admittedOrder(t, st, "t.g")
	assert.ElementsMatch(t, []int64{a1, a2, b1}, order, "group b is not held back by a full group a")
	assert.NotContains(t, order, a3)
	qs, err := st.QueueStats(context.Background(), "t.g")
	require.NoError(t, err)
	require.Len(t, qs, 2)
}

func TestOnLimitCancel(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.oc", store.Policy{Concurrency: store.Concurrency{Limit: intp(1), OnLimit: "cancel"}})
	first := request(t, st, "t.oc", "")
	second := request(t, st, "t.oc", "")
	e1, err := st.GetExecution(ctx, first)
	require.NoError(t, err)
	assert.NotNil(t, e1.AdmittedAt)
	e2, err := st.GetExecution(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, store.StatusCancelled, e2.Status)
	assert.Contains(t, *e2.StatusReason, "concurrency limit")
}

func TestReleaseIsExactlyOnce(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.x", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	a, b := request(t, st, "t.x", ""), request(t, st, "t.x", "")
	adm := finish(t, st, a)
	assert.Empty(t, adm.Woken, "b was requested, not queued: its own message wakes it")
	// A second finish (duplicate completion) loses its CAS and frees nothing.
	fin, _, err := st.Finish(ctx, a, []string{store.StatusRunning}, &store.Fence{WorkerID: "w1", Attempt: 1}, store.Outcome{Status: store.StatusFailed})
	require.NoError(t, err)
	assert.False(t, fin)
	s := stats(t, st, "t.x")
	assert.Equal(t, 1, s.ActiveCount, "b holds the only slot")
	assert.Equal(t, int64(1), s.TotalCompleted)
	eb, err := st.GetExecution(ctx, b)
	require.NoError(t, err)
	assert.NotNil(t, eb.AdmittedAt)
}

func TestTimelineRecordsEveryTransition(t *testing.T) {
	st := testenv.Store(t)
	registerAction(t, st, "t.tl", store.Policy{})
	id := request(t, st, "t.tl", "")
	finish(t, st, id)
	e, err := st.GetExecution(context.Background(), id)
	require.NoError(t, err)
	var to []string
	for _, tr := range e.Timeline {
		to = append(to, tr.To)
	}
	assert.Equal(t, []string{"requested", "scheduling", "scheduled", "running", "succeeded"}, to)
}
