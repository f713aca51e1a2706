package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/engine/store"
)

func register(t *testing.T, st *store.Store, id string) string {
	t.Helper()
	status, err := st.RegisterWorkerStatus(context.Background(), store.Worker{ID: id, Host: "h", Runtimes: []string{"builtin"}, Capacity: 4})
	require.NoError(t, err)
	return status
}

func setStatus(t *testing.T, st *store.Store, id, op string) string {
	t.Helper()
	w, err := st.SetWorkerStatus(context.Background(), id, op)
	require.NoError(t, err)
	return w.Status
}

func TestOperatorStatusesSurviveRegistrationAndStops(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	assert.Equal(t, store.WorkerActive, register(t, st, "w"))
	assert.Equal(t, store.WorkerCordoned, setStatus(t, st, "w", store.WorkerCordoned))
	assert.Equal(t, store.WorkerCordoned, register(t, st, "w"), "a restart keeps a cordon")
	status, err := st.Heartbeat(ctx, "w", 0)
	require.NoError(t, err)
	assert.Equal(t, store.WorkerCordoned, status, "a heartbeat changes nothing")

	assert.Equal(t, store.WorkerDraining, setStatus(t, st, "w", store.WorkerDraining))
	assert.Equal(t, store.WorkerDrained, register(t, st, "w"), "restarted mid-drain: nothing in flight, drained")
	assert.Equal(t, store.WorkerActive, setStatus(t, st, "w", store.WorkerActive))

	// The worker's own shutdown is not an operator drain.
	require.NoError(t, st.MarkWorkerStopping(ctx, "w"))
	w, err := st.GetWorker(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, store.WorkerDraining, w.Status)
	assert.Equal(t, store.WorkerDraining, setStatus(t, st, "w", store.WorkerActive), "uncordon does not undo a shutdown…")
	require.NoError(t, st.MarkWorkerStopping(ctx, "w"))
	assert.Equal(t, store.WorkerActive, register(t, st, "w"), "…and a worker killed during its shutdown comes back active")
	require.NoError(t, st.MarkWorkerStopping(ctx, "w"))
	status, err = st.MarkWorkerStopped(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, store.WorkerInactive, status)

	// An operator drain during a shutdown wins: the worker ends drained.
	register(t, st, "w")
	require.NoError(t, st.MarkWorkerStopping(ctx, "w"))
	assert.Equal(t, store.WorkerDraining, setStatus(t, st, "w", store.WorkerDraining))
	status, err = st.MarkWorkerStopped(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, store.WorkerDrained, status)
}

func TestDrainEndsOnlyWhenNothingIsAssigned(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	registerAction(t, st, "t.a", store.Policy{})
	register(t, st, "w1")
	id := request(t, st, "t.a", "")
	c, ok, err := st.ClaimForScheduling(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = st.MarkScheduled(ctx, c.ID, "w1")
	require.NoError(t, err)
	require.True(t, ok)

	done, err := st.MarkWorkerDrained(ctx, "w1")
	require.NoError(t, err)
	assert.False(t, done, "not draining")
	setStatus(t, st, "w1", store.WorkerDraining)
	done, err = st.MarkWorkerDrained(ctx, "w1")
	require.NoError(t, err)
	assert.False(t, done, "a dispatch is still assigned")
	finish(t, st, id)
	done, err = st.MarkWorkerDrained(ctx, "w1")
	require.NoError(t, err)
	assert.True(t, done)
}

func TestStaleWorkersAndTheirOrphans(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	registerAction(t, st, "t.a", store.Policy{})
	for _, id := range []string{"active", "cordoned", "draining", "stopped", "fresh"} {
		register(t, st, id)
	}
	setStatus(t, st, "cordoned", store.WorkerCordoned)
	setStatus(t, st, "draining", store.WorkerDraining)
	require.NoError(t, st.MarkWorkerStopping(ctx, "stopped"))
	_, err := st.MarkWorkerStopped(ctx, "stopped")
	require.NoError(t, err)
	// A cordoned worker and a stopped one still have a dispatch assigned.
	for _, w := range []string{"cordoned", "stopped"} {
		id := request(t, st, "t.a", "")
		c, ok, err := st.ClaimForScheduling(ctx, id)
		require.NoError(t, err)
		require.True(t, ok)
		_, ok, err = st.MarkScheduled(ctx, c.ID, w)
		require.NoError(t, err)
		require.True(t, ok)
	}
	time.Sleep(300 * time.Millisecond)
	_, err = st.Heartbeat(ctx, "fresh", 0)
	require.NoError(t, err)

	stale, err := st.StaleWorkers(ctx, 200*time.Millisecond)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"active", "cordoned", "draining", "stopped"}, stale)
	want := map[string]string{"active": store.WorkerInactive, "cordoned": store.WorkerCordoned,
		"draining": store.WorkerDrained, "stopped": store.WorkerInactive, "fresh": store.WorkerActive}
	for id, status := range want {
		w, err := st.GetWorker(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, status, w.Status, id)
	}
	again, err := st.StaleWorkers(ctx, 200*time.Millisecond)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"cordoned", "stopped"}, again, "only workers with unfinished executions come back")
}

func TestMetricsSnapshot(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	registerAction(t, st, "t.limited", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	register(t, st, "w1")
	register(t, st, "w2")
	setStatus(t, st, "w2", store.WorkerCordoned)
	before := store.FinishedTotals()
	done := request(t, st, "t.limited", "")
	finish(t, st, done)
	request(t, st, "t.limited", "") // admitted: requested, holds the slot
	request(t, st, "t.limited", "g2")
	request(t, st, "t.limited", "") // waits for the slot
	exec := int64(done)
	_, _, err := st.RecordDeadLetter(ctx, store.DeadLetter{Queue: "q", Reason: "expired", ExecutionID: &exec, Payload: []byte("{}")})
	require.NoError(t, err)

	snap, err := st.MetricsSnapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"requested": 3, "scheduling": 0, "queued": 0, "scheduled": 0, "running": 0, "canceling": 0}, snap.Unfinished)
	assert.Equal(t, []store.QueueMetric{{ActionRef: "t.limited", Length: 1, Active: 2}}, snap.Queues)
	assert.Equal(t, map[string]int64{"expired": 1}, snap.DeadLetters)
	require.Len(t, snap.Workers, 2)
	for _, w := range snap.Workers {
		assert.Less(t, w.HeartbeatAge, 5*time.Second)
		assert.Equal(t, 4, w.Capacity)
	}
	after := store.FinishedTotals()
	assert.Equal(t, before[store.StatusSucceeded]+1, after[store.StatusSucceeded])
	assert.Contains(t, after, store.StatusAbandoned)
}
