package store_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/engine/store"
)

func TestDeadLetterRecordIsDedupedPerDeath(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	at := time.Now().Truncate(time.Second)
	exec := int64(42)
	dl := store.DeadLetter{Queue: "worker.w1.executions", Exchange: "attune.executions", RoutingKey: "execution.dispatch.worker.w1",
		Reason: "expired", DeathCount: 1, FirstDeathAt: &at, ExecutionID: &exec, MessageType: "execution.dispatch",
		MessageID: "m-1", Payload: []byte(`{"execution_id":42}`), Headers: json.RawMessage(`{"x-death":[]}`), DedupeKey: "m-1|expired|1"}
	id, created, err := st.RecordDeadLetter(ctx, dl)
	require.NoError(t, err)
	assert.True(t, created)
	again, created, err := st.RecordDeadLetter(ctx, dl)
	require.NoError(t, err)
	assert.False(t, created, "a redelivered dead letter is not recorded twice")
	assert.Equal(t, id, again)

	// Without a message id nothing tells deliveries apart: each is kept.
	garbage := store.DeadLetter{Queue: "q", Reason: "rejected", Payload: []byte{0xff, 0x00}}
	g1, created1, err := st.RecordDeadLetter(ctx, garbage)
	require.NoError(t, err)
	g2, created2, err := st.RecordDeadLetter(ctx, garbage)
	require.NoError(t, err)
	assert.True(t, created1 && created2)
	assert.NotEqual(t, g1, g2)

	got, err := st.GetDeadLetter(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "worker.w1.executions", got.Queue)
	assert.Equal(t, "expired", got.Reason)
	assert.Equal(t, int64(42), *got.ExecutionID)
	assert.Equal(t, "m-1", got.MessageID)
	assert.True(t, at.Equal(*got.FirstDeathAt))
	assert.JSONEq(t, `{"execution_id":42}`, string(got.Payload))
	raw, err := st.GetDeadLetter(ctx, g1)
	require.NoError(t, err)
	assert.Equal(t, []byte{0xff, 0x00}, raw.Payload, "unparseable payloads are kept as bytes")

	_, err = st.GetDeadLetter(ctx, 999999)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestDeadLetterListFiltersPagesAndDeletes(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	var ids []int64
	for i, r := range []string{"expired", "rejected", "expired", "maxlen", "expired"} {
		q := "worker.a.executions"
		if i%2 == 1 {
			q = "attune.execution.requests.queue"
		}
		id, _, err := st.RecordDeadLetter(ctx, store.DeadLetter{Queue: q, Reason: r, Payload: []byte("x")})
		require.NoError(t, err)
		ids = append(ids, id)
	}
	page, next, err := st.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: "expired", Limit: 2})
	require.NoError(t, err)
	require.Len(t, page, 2)
	assert.Equal(t, []int64{ids[4], ids[2]}, []int64{page[0].ID, page[1].ID}, "newest first")
	require.Equal(t, ids[2], next)
	page, next, err = st.ListDeadLetters(ctx, store.DeadLetterFilter{Reason: "expired", Limit: 2, Before: next})
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, ids[0], page[0].ID)
	assert.Zero(t, next)

	byQueue, _, err := st.ListDeadLetters(ctx, store.DeadLetterFilter{Queue: "attune.execution.requests.queue"})
	require.NoError(t, err)
	assert.Len(t, byQueue, 2)

	sel, err := st.DeadLetterIDs(ctx, store.DeadLetterFilter{Reason: "expired", Queue: "worker.a.executions"}, 10)
	require.NoError(t, err)
	assert.Equal(t, []int64{ids[4], ids[2], ids[0]}, sel)

	gone, err := st.DeleteDeadLetters(ctx, []int64{ids[0], ids[1], 999999})
	require.NoError(t, err)
	assert.ElementsMatch(t, []int64{ids[0], ids[1]}, gone)
	all, _, err := st.ListDeadLetters(ctx, store.DeadLetterFilter{})
	require.NoError(t, err)
	assert.Len(t, all, 3)
}

func TestDeadLetterReplayIsClaimedOnce(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	id, _, err := st.RecordDeadLetter(ctx, store.DeadLetter{Queue: "q", Reason: "rejected", Payload: []byte("x")})
	require.NoError(t, err)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, ok, err := st.ClaimReplay(ctx, id)
			assert.NoError(t, err)
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	require.NoError(t, st.UnclaimReplay(ctx, id))
	d, ok, err := st.ClaimReplay(ctx, id)
	require.NoError(t, err)
	require.True(t, ok, "a released claim can be taken again")
	assert.NotNil(t, d.ReplayedAt)
	require.NoError(t, st.SetReplayExecution(ctx, id, 77))
	require.NoError(t, st.UnclaimReplay(ctx, id))
	d, err = st.GetDeadLetter(ctx, id)
	require.NoError(t, err)
	assert.NotNil(t, d.ReplayedAt, "a replay that created an execution stays claimed")
	assert.Equal(t, int64(77), *d.ReplayExecutionID)
	_, _, err = st.ClaimReplay(ctx, 999999)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestOneSuccessorPerAttempt(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.a", store.Policy{})
	orig := request(t, st, "t.a", "")
	var created atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, _, err := st.RequestExecution(ctx, store.Request{ActionRef: "t.a", MaxQueueLength: 100, RetryOf: &orig, Attempt: 2})
			if err == nil {
				created.Add(1)
			} else {
				assert.ErrorIs(t, err, store.ErrConflict)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), created.Load(), "retries and replays of one attempt: exactly one successor")
	succ, err := st.SuccessorOf(ctx, orig)
	require.NoError(t, err)
	e, err := st.GetExecution(ctx, succ)
	require.NoError(t, err)
	assert.Equal(t, 2, e.Attempt)
	stats, err := st.QueueStats(ctx, "t.a")
	require.NoError(t, err)
	assert.Equal(t, int64(2), stats[0].TotalEnqueued, "the losers left no trace in the queue")
}

func TestRetryDecisionIsTakenOnceAndLeased(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	registerAction(t, st, "t.a", store.Policy{})
	id := request(t, st, "t.a", "")
	won, err := st.DecideRetry(ctx, id, store.RetryPending, 0)
	require.NoError(t, err)
	assert.False(t, won, "an unfinished execution has nothing to decide")
	fin, _, err := st.Finish(ctx, id, store.Unstarted, nil, store.Outcome{Status: store.StatusFailed, Reason: "boom"})
	require.NoError(t, err)
	require.True(t, fin)

	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			ok, err := st.DecideRetry(ctx, id, store.RetryPending, 0)
			assert.NoError(t, err)
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load())
	f, err := st.GetFinished(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, store.RetryPending, f.RetryState)
	assert.False(t, f.Started)

	due, err := st.ClaimDueRetries(ctx, time.Minute, 10)
	require.NoError(t, err)
	assert.Equal(t, []int64{id}, due)
	due, err = st.ClaimDueRetries(ctx, time.Minute, 10)
	require.NoError(t, err)
	assert.Empty(t, due, "a leased retry is not handed out twice")
	require.NoError(t, st.SettleRetry(ctx, id, store.RetryDone))
	f, err = st.GetFinished(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, store.RetryDone, f.RetryState)
}

func TestUndecidedRetriesOnlyForActionsThatRetry(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	require.NoError(t, st.UpsertPack(ctx, store.Pack{Ref: "t"}))
	for ref, retry := range map[string]string{"t.retry": `{"max_retries": 2, "retry_on": ["failed"]}`, "t.plain": `{}`, "t.odd": `{"max_retries": "2"}`} {
		_, err := st.UpsertAction(ctx, store.Action{Ref: ref, Pack: "t", Name: ref, Runtime: "builtin", Entrypoint: "noop", Retry: json.RawMessage(retry)})
		require.NoError(t, err)
	}
	fail := func(ref string) int64 {
		id := request(t, st, ref, "")
		fin, _, err := st.Finish(ctx, id, store.Unstarted, nil, store.Outcome{Status: store.StatusFailed, Reason: "boom"})
		require.NoError(t, err)
		require.True(t, fin)
		return id
	}
	retried, _, _ := fail("t.retry"), fail("t.plain"), fail("t.odd")
	ids, err := st.UndecidedRetries(ctx, 0, time.Hour, 10)
	require.NoError(t, err)
	assert.Equal(t, []int64{retried}, ids)
	ids, err = st.UndecidedRetries(ctx, time.Hour, 2*time.Hour, 10)
	require.NoError(t, err)
	assert.Empty(t, ids, "too recent: the completion handler gets the first go")
	ok, err := st.DecideRetry(ctx, retried, store.RetryNone, 0)
	require.NoError(t, err)
	require.True(t, ok)
	ids, err = st.UndecidedRetries(ctx, 0, time.Hour, 10)
	require.NoError(t, err)
	assert.Empty(t, ids)
}
