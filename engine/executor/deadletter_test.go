package executor_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker"
)

// hungWorker registers a worker that declared its queue (with ttl) and then
// stopped consuming while its heartbeat stays fresh: the executor keeps
// dispatching to it and its dispatches expire. stop ends the heartbeat.
func (c *cluster) hungWorker(id string, ttl time.Duration, runtimes ...string) (stop func()) {
	c.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(c.t, c.conn.Declare(ctx, func(ch *amqp.Channel) error {
		return broker.DeclareWorkerQueue(ch, id, int(ttl/time.Millisecond))
	}))
	if len(runtimes) == 0 {
		runtimes = []string{"builtin", "shell"}
	}
	require.NoError(c.t, c.st.RegisterWorker(ctx, store.Worker{ID: id, Host: "hung", Runtimes: runtimes, Capacity: 8}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_, _ = c.st.Heartbeat(ctx, id, 0)
			}
		}
	}()
	stop = func() { cancel(); <-done }
	c.t.Cleanup(stop)
	return stop
}

// deadLetters waits until at least n dead letters matching f are recorded.
func (c *cluster) deadLetters(f store.DeadLetterFilter, n int, within time.Duration) []store.DeadLetter {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		items, _, err := c.st.ListDeadLetters(context.Background(), f)
		require.NoError(c.t, err)
		if len(items) >= n {
			return items
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%d dead letters matching %+v after %s, want %d", len(items), f, within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func noRedrive(cfg *executor.Config) {
	cfg.RedriveAfter = time.Minute
	cfg.LoopInterval = 200 * time.Millisecond
}

// Issue 5, scenario 5.
func TestDispatchExpiringInDeadWorkerQueueFailsAndReplaySucceeds(t *testing.T) {
	c := newCluster(t)
	c.executor(noRedrive)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	stop := c.hungWorker("hung-1", ttl)

	e := c.run("core.echo", map[string]any{"message": "again"})
	failed := c.wait(e.ID, 20*time.Second)
	require.Equal(t, store.StatusFailed, failed.Status)
	assert.Equal(t, executor.ReasonExpiredInQueue, deref(failed.StatusReason))
	assert.Equal(t, executor.ReasonExpiredInQueue, deref(failed.Error))
	assert.Equal(t, "hung-1", deref(failed.Worker))
	assert.Equal(t, 1, completions(t, c, e.ID))

	recs := c.deadLetters(store.DeadLetterFilter{Reason: "expired"}, 1, 10*time.Second)
	rec := recs[0]
	require.NotNil(t, rec.ExecutionID)
	assert.Equal(t, e.ID, *rec.ExecutionID)
	assert.Equal(t, broker.WorkerQueue("hung-1"), rec.Queue)
	assert.Equal(t, broker.ExchangeExecutions, rec.Exchange)
	assert.Equal(t, broker.WorkerRoutingKey("hung-1"), rec.RoutingKey)
	assert.Equal(t, messages.TypeExecutionDispatch, rec.MessageType)
	assert.Equal(t, int64(1), rec.DeathCount)
	assert.NotNil(t, rec.FirstDeathAt)
	assert.NotEmpty(t, rec.MessageID)
	assert.Contains(t, string(rec.Headers), "x-death")

	// The worker comes back (same id, same queue) and the operator replays.
	stop()
	c.worker(worker.Config{ID: "hung-1", QueueTTL: ttl, Capacity: 2})
	dl, err := c.svc.ReplayDeadLetter(ctx, rec.ID)
	require.NoError(t, err)
	require.NotNil(t, dl.ReplayedAt)
	require.NotNil(t, dl.ReplayExecutionID)
	replay := c.wait(*dl.ReplayExecutionID, 20*time.Second)
	require.Equal(t, store.StatusSucceeded, replay.Status, deref(replay.Error))
	assert.Equal(t, 2, replay.Attempt)
	require.NotNil(t, replay.RetryOf)
	assert.Equal(t, e.ID, *replay.RetryOf)
	assert.Equal(t, "again", resultOf(t, replay)["message"])

	_, err = c.svc.ReplayDeadLetter(ctx, rec.ID)
	assert.ErrorIs(t, err, store.ErrConflict, "a dead letter is replayed once")
	orig := mustGet(t, c, e.ID)
	assert.Equal(t, store.StatusFailed, orig.Status, "the original attempt keeps its outcome")
}

// Issue 5, scenario 6.
func TestGarbageOnEveryConsumedQueueBecomesARecord(t *testing.T) {
	c := newCluster(t)
	c.executor()
	w := c.worker(worker.Config{Capacity: 2})
	ctx := context.Background()
	pub := func(exchange, key, typ, body string) {
		require.NoError(t, c.pub.Publish(ctx, exchange, key, broker.Message{Type: typ, Body: []byte(body), Mandatory: true}))
	}
	for _, key := range []string{broker.KeyExecutionRequested, broker.KeyExecutionCompleted} {
		pub(broker.ExchangeExecutions, key, "", "not json")
		pub(broker.ExchangeExecutions, key, "bogus.type", `{"execution_id": 12345}`)
	}
	pub(broker.ExchangeExecutions, broker.WorkerRoutingKey(w.ID()), messages.TypeExecutionDispatch, "\x00\xff garbage")
	pub(broker.ExchangeDLX, "anything", "", "straight into the dead-letter exchange")

	e := c.wait(c.run("core.noop", nil).ID, 20*time.Second)
	assert.Equal(t, store.StatusSucceeded, e.Status, "the appliance keeps working")

	recs := c.deadLetters(store.DeadLetterFilter{}, 6, 20*time.Second)
	byQueue := map[string]int{}
	for _, r := range recs {
		byQueue[r.Queue]++
		if r.Queue != "" {
			assert.Equal(t, "rejected", r.Reason, "queue %s", r.Queue)
		}
	}
	assert.Equal(t, map[string]int{
		broker.QueueExecutionRequests: 2, broker.QueueExecutionCompleted: 2, broker.WorkerQueue(w.ID()): 1, "": 1,
	}, byQueue)
	for _, r := range recs {
		if r.MessageType == "bogus.type" {
			require.NotNil(t, r.ExecutionID, "an execution id is read from any JSON body")
			assert.Equal(t, int64(12345), *r.ExecutionID)
		}
		if r.Queue == broker.WorkerQueue(w.ID()) {
			assert.Equal(t, []byte("\x00\xff garbage"), r.Payload)
			assert.Nil(t, r.ExecutionID)
		}
	}
	// Every dead letter was consumed and acknowledged; nothing loops.
	ch, err := c.conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	require.Eventually(t, func() bool {
		q, err := ch.QueueDeclarePassive(broker.QueueDLX, true, false, false, false, nil)
		return err == nil && q.Messages == 0
	}, 10*time.Second, 50*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	again, _, err := c.st.ListDeadLetters(ctx, store.DeadLetterFilter{})
	require.NoError(t, err)
	assert.Len(t, again, len(recs), "no record appears twice")
}

func TestRedeliveredDeadLetterIsRecordedOnce(t *testing.T) {
	c := newCluster(t)
	c.executor()
	ctx := context.Background()
	ch, err := c.conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	died := time.Now().Truncate(time.Second)
	msg := amqp.Publishing{MessageId: "same-message", Type: messages.TypeExecutionRequested, Body: []byte(`{"execution_id": 5}`),
		Headers: amqp.Table{"x-death": []any{amqp.Table{"count": int64(1), "reason": "rejected", "queue": broker.QueueExecutionRequests,
			"time": died, "exchange": broker.ExchangeExecutions, "routing-keys": []any{broker.KeyExecutionRequested}}}}}
	// The same dead letter delivered twice, as after a consumer crash
	// between recording and acknowledging it.
	for range 2 {
		require.NoError(t, ch.PublishWithContext(ctx, broker.ExchangeDLX, broker.KeyExecutionRequested, false, false, msg))
	}
	recs := c.deadLetters(store.DeadLetterFilter{}, 1, 10*time.Second)
	require.Eventually(t, func() bool {
		q, err := ch.QueueDeclarePassive(broker.QueueDLX, true, false, false, false, nil)
		return err == nil && q.Messages == 0
	}, 10*time.Second, 50*time.Millisecond)
	recs, _, err = c.st.ListDeadLetters(ctx, store.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, broker.QueueExecutionRequests, recs[0].Queue)
	assert.Equal(t, broker.KeyExecutionRequested, recs[0].RoutingKey)
	assert.True(t, died.Equal(*recs[0].FirstDeathAt))
	assert.Equal(t, int64(5), *recs[0].ExecutionID)
}

func TestReplayRepublishesADeadLetterWithoutExecution(t *testing.T) {
	c := newCluster(t)
	c.executor()
	ctx := context.Background()
	require.NoError(t, c.conn.Declare(ctx, func(ch *amqp.Channel) error {
		if _, err := ch.QueueDeclare("t.inbox", true, false, false, false, amqp.Table{"x-dead-letter-exchange": broker.ExchangeDLX}); err != nil {
			return err
		}
		return ch.QueueBind("t.inbox", "inbox.key", broker.ExchangeEvents, false, nil)
	}))
	ch, err := c.conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, c.pub.Publish(ctx, broker.ExchangeEvents, "inbox.key", broker.Message{Type: "event.x", Body: []byte("payload"), Mandatory: true}))
	d, ok, err := ch.Get("t.inbox", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, d.Nack(false, false))
	rec := c.deadLetters(store.DeadLetterFilter{Queue: "t.inbox"}, 1, 10*time.Second)[0]
	assert.Equal(t, broker.ExchangeEvents, rec.Exchange)
	assert.Equal(t, "inbox.key", rec.RoutingKey)
	assert.Nil(t, rec.ExecutionID)

	out, err := c.svc.ReplayDeadLetter(ctx, rec.ID)
	require.NoError(t, err)
	assert.NotNil(t, out.ReplayedAt)
	assert.Nil(t, out.ReplayExecutionID)
	var back amqp.Delivery
	require.Eventually(t, func() bool {
		back, ok, err = ch.Get("t.inbox", true)
		return err == nil && ok
	}, 10*time.Second, 20*time.Millisecond, "the payload is back in its original queue")
	assert.Equal(t, "payload", string(back.Body))
	assert.Equal(t, "event.x", back.Type)
	assert.NotEqual(t, rec.MessageID, back.MessageId)
	_, err = c.svc.ReplayDeadLetter(ctx, rec.ID)
	assert.ErrorIs(t, err, store.ErrConflict)
}

// Issue 5, scenario 7: the dead-letter handler and the timeout monitor of
// two executors race for the same scheduled executions; each ends exactly
// once.
func TestDeadLetterHandlerAndTimeoutMonitorNeverBothFinish(t *testing.T) {
	c := newCluster(t)
	race := func(cfg *executor.Config) {
		cfg.ScheduledTimeout = 400 * time.Millisecond
		cfg.LoopInterval = 50 * time.Millisecond
	}
	c.executor(race)
	c.executor(race)
	c.hungWorker("hung-7", 400*time.Millisecond)
	var ids []int64
	for range 30 {
		ids = append(ids, c.run("core.noop", nil).ID)
	}
	reasons := map[string]int{}
	for _, id := range ids {
		e := c.wait(id, 30*time.Second)
		require.Equal(t, store.StatusFailed, e.Status)
		reasons[deref(e.StatusReason)]++
		assert.Equal(t, 1, completions(t, c, id), "execution %d has one final transition", id)
	}
	t.Logf("outcomes: %v", reasons)
	for r := range reasons {
		assert.Contains(t, []string{executor.ReasonExpiredInQueue, "worker did not pick up the execution"}, r)
	}
	// Dead letters that lost the race are still recorded.
	c.deadLetters(store.DeadLetterFilter{Queue: broker.WorkerQueue("hung-7")}, len(ids), 20*time.Second)
}
