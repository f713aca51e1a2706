// Package broker is the appliance's RabbitMQ layer: the topology of exchanges
// and queues, a publisher with confirms, and consumers with manual acks. The
// private node launcher lives in broker/rabbitnode.
package broker

import (
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Exchange names (DESIGN.md, "Messaging").
const (
	ExchangeEvents        = "attune.events"
	ExchangeExecutions    = "attune.executions"
	ExchangeNotifications = "attune.notifications"
	ExchangeDLX           = "attune.dlx"
)

// Queue names consumed by the executor and the dead-letter handler.
const (
	QueueExecutionRequests  = "attune.execution.requests.queue"
	QueueExecutionStatus    = "attune.execution.status.queue"
	QueueExecutionCompleted = "attune.execution.completed.queue"
	QueueEnforcements       = "attune.enforcements.queue"
	QueueInquiryResponses   = "attune.inquiry.responses.queue"
	QueueDLX                = "attune.dlx.queue"
)

// Routing keys on attune.executions.
const (
	KeyExecutionRequested = "execution.requested"
	KeyExecutionStatus    = "execution.status"
	KeyExecutionCompleted = "execution.completed"
	KeyEnforcement        = "enforcement.created"
	KeyInquiryResponse    = "inquiry.responded"
)

// WorkerQueue is the queue a worker consumes its dispatches from.
func WorkerQueue(workerID string) string { return "worker." + workerID + ".executions" }

// WorkerRoutingKey routes a dispatch to one worker's queue.
func WorkerRoutingKey(workerID string) string { return "execution.dispatch.worker." + workerID }

// DeclareExchanges declares every exchange and the dead-letter queue. Any
// part may call it; declarations are idempotent so parts start in any order.
func DeclareExchanges(ch *amqp.Channel) error {
	for _, ex := range []struct{ name, kind string }{
		{ExchangeEvents, amqp.ExchangeTopic},
		{ExchangeExecutions, amqp.ExchangeTopic},
		{ExchangeNotifications, amqp.ExchangeFanout},
		// fanout: a dead-lettered message keeps its original routing key, and
		// a fanout exchange routes it whatever that key is.
		{ExchangeDLX, amqp.ExchangeFanout},
	} {
		if err := ch.ExchangeDeclare(ex.name, ex.kind, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", ex.name, err)
		}
	}
	if _, err := ch.QueueDeclare(QueueDLX, true, false, false, false, nil); err != nil {
		return fmt.Errorf("declare queue %s: %w", QueueDLX, err)
	}
	if err := ch.QueueBind(QueueDLX, "", ExchangeDLX, false, nil); err != nil {
		return fmt.Errorf("bind %s: %w", QueueDLX, err)
	}
	return nil
}

// deadLettered are the arguments that send rejected or expired messages to
// the dead-letter exchange.
func deadLettered() amqp.Table { return amqp.Table{"x-dead-letter-exchange": ExchangeDLX} }

// DeclareExecutorQueues declares the queues the executor consumes.
func DeclareExecutorQueues(ch *amqp.Channel) error {
	if err := DeclareExchanges(ch); err != nil {
		return err
	}
	for _, q := range []struct{ name, key string }{
		{QueueExecutionRequests, KeyExecutionRequested},
		{QueueExecutionStatus, KeyExecutionStatus + ".#"},
		{QueueExecutionCompleted, KeyExecutionCompleted},
		{QueueEnforcements, KeyEnforcement},
		{QueueInquiryResponses, KeyInquiryResponse},
	} {
		if _, err := ch.QueueDeclare(q.name, true, false, false, false, deadLettered()); err != nil {
			return fmt.Errorf("declare queue %s: %w", q.name, err)
		}
		if err := ch.QueueBind(q.name, q.key, ExchangeExecutions, false, nil); err != nil {
			return fmt.Errorf("bind queue %s: %w", q.name, err)
		}
	}
	return nil
}

// DeclareWorkerQueue declares one worker's dispatch queue: durable and not
// auto-deleted, so dispatches are never lost with their worker; a message TTL
// sends what a dead worker never takes to the dead-letter queue.
func DeclareWorkerQueue(ch *amqp.Channel, workerID string, ttlMillis int) error {
	if err := DeclareExchanges(ch); err != nil {
		return err
	}
	args := deadLettered()
	args["x-message-ttl"] = int32(ttlMillis)
	q := WorkerQueue(workerID)
	if _, err := ch.QueueDeclare(q, true, false, false, false, args); err != nil {
		return fmt.Errorf("declare queue %s: %w", q, err)
	}
	if err := ch.QueueBind(q, WorkerRoutingKey(workerID), ExchangeExecutions, false, nil); err != nil {
		return fmt.Errorf("bind queue %s: %w", q, err)
	}
	return nil
}

// DeclareNotificationQueue declares this node's exclusive, auto-deleted
// queue on the notifications fanout (the dashboard's live feed).
func DeclareNotificationQueue(ch *amqp.Channel) (string, error) {
	if err := DeclareExchanges(ch); err != nil {
		return "", err
	}
	q, err := ch.QueueDeclare("", false, true, true, false, amqp.Table{"x-max-length": int32(10000), "x-overflow": "drop-head"})
	if err != nil {
		return "", fmt.Errorf("declare notification queue: %w", err)
	}
	if err := ch.QueueBind(q.Name, "", ExchangeNotifications, false, nil); err != nil {
		return "", fmt.Errorf("bind notification queue: %w", err)
	}
	return q.Name, nil
}
