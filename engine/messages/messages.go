// Package messages defines the bodies the engines exchange over RabbitMQ and
// how each is published, so the routing lives in one place.
package messages

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/attune-io/attune/broker"
)

// Message types (the AMQP "type" property).
const (
	TypeExecutionRequested = "execution.requested"
	TypeExecutionDispatch  = "execution.dispatch"
	TypeExecutionCompleted = "execution.completed"
	TypeExecutionCancel    = "execution.cancel"
	TypeExecutionChanged   = "execution.changed"
)

// ExecutionRequested asks an executor to claim and schedule an execution
// (also sent to wake a promoted head and to re-drive a stale row).
type ExecutionRequested struct {
	ExecutionID int64 `json:"execution_id"`
}

// ExecutionDispatch hands an execution to one worker.
type ExecutionDispatch struct {
	ExecutionID int64  `json:"execution_id"`
	WorkerID    string `json:"worker_id"`
	Attempt     int    `json:"attempt"`
}

// ExecutionCompleted reports that an execution reached a final status.
type ExecutionCompleted struct {
	ExecutionID int64  `json:"execution_id"`
	Status      string `json:"status"`
	WorkerID    string `json:"worker_id,omitempty"`
	Attempt     int    `json:"attempt"`
}

// ExecutionCancel tells a worker to stop a running execution.
type ExecutionCancel struct {
	ExecutionID int64  `json:"execution_id"`
	WorkerID    string `json:"worker_id"`
	Attempt     int    `json:"attempt"`
}

// ExecutionChanged is a notification for dashboards (fanout, best effort).
type ExecutionChanged struct {
	ExecutionID int64  `json:"execution_id"`
	ActionRef   string `json:"action_ref,omitempty"`
	Status      string `json:"status"`
}

// CancelRoutingKey routes a cancel to a worker's control queue.
func CancelRoutingKey(workerID string) string { return "execution.cancel.worker." + workerID }

// Publisher is the part of broker.Publisher the engines use.
type Publisher interface {
	Publish(ctx context.Context, exchange, key string, msg broker.Message) error
}

func publish(ctx context.Context, p Publisher, exchange, key, typ string, body any, mandatory bool) error {
	return publishMsg(ctx, p, exchange, key, typ, body, broker.Message{Mandatory: mandatory})
}

func publishMsg(ctx context.Context, p Publisher, exchange, key, typ string, body any, msg broker.Message) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", typ, err)
	}
	msg.Type, msg.Body = typ, b
	return p.Publish(ctx, exchange, key, msg)
}

// PublishRequested sends execution.requested for id.
func PublishRequested(ctx context.Context, p Publisher, id int64) error {
	return publish(ctx, p, broker.ExchangeExecutions, broker.KeyExecutionRequested, TypeExecutionRequested,
		ExecutionRequested{ExecutionID: id}, true)
}

// PublishDispatch sends a dispatch to the worker's queue; mandatory, so a
// queue that no longer exists comes back as broker.ErrUnroutable.
func PublishDispatch(ctx context.Context, p Publisher, d ExecutionDispatch) error {
	return publish(ctx, p, broker.ExchangeExecutions, broker.WorkerRoutingKey(d.WorkerID), TypeExecutionDispatch, d, true)
}

// PublishCompleted announces a final status to the executors.
func PublishCompleted(ctx context.Context, p Publisher, c ExecutionCompleted) error {
	return publish(ctx, p, broker.ExchangeExecutions, broker.KeyExecutionCompleted, TypeExecutionCompleted, c, true)
}

// PublishCancel tells a worker to stop an execution; not mandatory: a worker
// that is gone has nothing to stop (the dead-worker reaper handles its rows).
func PublishCancel(ctx context.Context, p Publisher, c ExecutionCancel) error {
	return publish(ctx, p, broker.ExchangeExecutions, CancelRoutingKey(c.WorkerID), TypeExecutionCancel, c, false)
}

// PublishChanged notifies dashboards; best effort, so transient (no disk write).
func PublishChanged(ctx context.Context, p Publisher, c ExecutionChanged) error {
	return publishMsg(ctx, p, broker.ExchangeNotifications, "", TypeExecutionChanged, c, broker.Message{Transient: true})
}

// Decode parses a message body, marking bad bodies permanent so they go to
// the dead-letter queue instead of being redelivered.
func Decode[T any](d broker.Delivery) (T, error) {
	var v T
	if err := json.Unmarshal(d.Body, &v); err != nil {
		return v, broker.Permanent(fmt.Errorf("malformed %s message: %w", d.Type, err))
	}
	return v, nil
}
