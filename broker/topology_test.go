package broker_test

import (
	"context"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/broker"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func dial(t *testing.T) *broker.Conn {
	t.Helper()
	conn, err := broker.Dial(context.Background(), testenv.AMQPURL(t), testenv.Logger(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestTopologyIsDeclaredIdempotently(t *testing.T) {
	conn := dial(t)
	ctx := context.Background()
	for range 2 { // a second declaration by another part changes nothing
		require.NoError(t, conn.Declare(ctx, broker.DeclareExecutorQueues))
		require.NoError(t, conn.Declare(ctx, func(ch *amqp.Channel) error { return broker.DeclareWorkerQueue(ch, "w1", 300000) }))
	}
	ch, err := conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	for _, ex := range []struct{ name, kind string }{
		{broker.ExchangeEvents, "topic"}, {broker.ExchangeExecutions, "topic"},
		{broker.ExchangeNotifications, "fanout"}, {broker.ExchangeDLX, "fanout"},
	} {
		assert.NoError(t, ch.ExchangeDeclarePassive(ex.name, ex.kind, true, false, false, false, nil), ex.name)
	}
	for _, q := range []string{broker.QueueExecutionRequests, broker.QueueExecutionStatus, broker.QueueExecutionCompleted,
		broker.QueueEnforcements, broker.QueueInquiryResponses, broker.QueueDLX, broker.WorkerQueue("w1")} {
		_, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		assert.NoError(t, err, q)
	}
}

func TestExpiredWorkerDispatchLandsInDLQWithXDeath(t *testing.T) {
	conn := dial(t)
	ctx := context.Background()
	require.NoError(t, conn.Declare(ctx, func(ch *amqp.Channel) error { return broker.DeclareWorkerQueue(ch, "gone", 100) }))
	pub := broker.NewPublisher(conn)
	defer pub.Close()
	require.NoError(t, pub.Publish(ctx, broker.ExchangeExecutions, broker.WorkerRoutingKey("gone"),
		broker.Message{Type: "execution.dispatch", Body: []byte(`{"execution_id":7}`), Mandatory: true}))

	ch, err := conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	var got amqp.Delivery
	require.Eventually(t, func() bool {
		d, ok, err := ch.Get(broker.QueueDLX, true)
		require.NoError(t, err)
		got = d
		return ok
	}, 15*time.Second, 50*time.Millisecond, "expired dispatch never reached %s", broker.QueueDLX)
	assert.JSONEq(t, `{"execution_id":7}`, string(got.Body))
	deaths, ok := got.Headers["x-death"].([]any)
	require.True(t, ok, "x-death header present: %v", got.Headers)
	first := deaths[0].(amqp.Table)
	assert.Equal(t, "expired", first["reason"])
	assert.Equal(t, broker.WorkerQueue("gone"), first["queue"])
}

func TestMandatoryPublishToMissingQueueComesBack(t *testing.T) {
	conn := dial(t)
	ctx := context.Background()
	require.NoError(t, conn.Declare(ctx, broker.DeclareExchanges))
	pub := broker.NewPublisher(conn)
	defer pub.Close()
	err := pub.Publish(ctx, broker.ExchangeExecutions, broker.WorkerRoutingKey("nobody"), broker.Message{Body: []byte(`{}`), Mandatory: true})
	require.ErrorIs(t, err, broker.ErrUnroutable)
	// The publisher keeps working afterwards.
	require.NoError(t, conn.Declare(ctx, broker.DeclareExecutorQueues))
	require.NoError(t, pub.Publish(ctx, broker.ExchangeExecutions, broker.KeyExecutionRequested, broker.Message{Body: []byte(`{}`), Mandatory: true}))
}

func TestPermanentHandlerErrorDeadLettersAndPanicsDoNotCrash(t *testing.T) {
	conn := dial(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, conn.Declare(ctx, broker.DeclareExecutorQueues))
	pub := broker.NewPublisher(conn)
	defer pub.Close()
	handled := make(chan string, 10)
	go func() {
		_ = conn.Consume(ctx, broker.ConsumeOptions{Queue: broker.QueueExecutionStatus, Prefetch: 2}, func(_ context.Context, d broker.Delivery) error {
			handled <- string(d.Body)
			switch string(d.Body) {
			case "panic":
				panic("boom")
			case "bad":
				return broker.Permanent(assert.AnError)
			}
			return nil
		})
	}()
	for _, b := range []string{"panic", "bad", "good"} {
		require.NoError(t, pub.Publish(ctx, broker.ExchangeExecutions, broker.KeyExecutionStatus+".x", broker.Message{Body: []byte(b), Mandatory: true}))
	}
	var seen []string
	for range 3 {
		select {
		case s := <-handled:
			seen = append(seen, s)
		case <-time.After(10 * time.Second):
			t.Fatalf("only handled %v", seen)
		}
	}
	assert.ElementsMatch(t, []string{"panic", "bad", "good"}, seen)
	ch, err := conn.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	require.Eventually(t, func() bool {
		q, err := ch.QueueDeclarePassive(broker.QueueDLX, true, false, false, false, nil)
		return err == nil && q.Messages == 2
	}, 10*time.Second, 50*time.Millisecond, "panic and permanent error both dead-lettered, nothing redelivered")
}
