package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
)

// ReasonExpiredInQueue is the status reason of an execution whose dispatch
// expired (message TTL) in its worker's queue before the worker took it.
const ReasonExpiredInQueue = "expired in worker queue"

// deadLetterPrefetch bounds dead letters handled at once per executor.
const deadLetterPrefetch = 16

// deadLetterRetryMax caps the wait between attempts to record a dead letter
// while the database is unavailable.
const deadLetterRetryMax = 5 * time.Second

// consumeDeadLetters runs the dead-letter handler on attune.dlx.queue until
// ctx ends. Every replica runs it: RabbitMQ gives each dead letter to one
// consumer, and both the record (dedupe key) and the execution update
// (compare-and-swap) are idempotent under redelivery.
func (e *Executor) consumeDeadLetters(ctx context.Context, onReady func()) {
	_ = e.conn.Consume(ctx, broker.ConsumeOptions{
		Queue: broker.QueueDLX, Prefetch: deadLetterPrefetch, Declare: broker.DeclareExchanges, Logger: e.log,
		HandlerCtx: ctx,
		// The dead-letter queue has no dead-letter exchange of its own: a
		// message it rejects is gone. The handler retries by itself and
		// only fails when the executor stops; then the message is requeued
		// for the next start. (The consumer counts a message without an id
		// as 1<<20 failures at once, so such a message is dropped if the
		// executor stops during a database outage; a higher limit would
		// make the consumer sleep for hours before requeueing it.)
		MaxAttempts: 1 << 20,
		OnReady:     onReady,
	}, e.handleDeadLetter)
}

// handleDeadLetter records every dead letter and then settles the execution
// an expired dispatch was for. A body that cannot be parsed is still
// recorded, as raw bytes. A failure to write is transient: it is retried
// with a capped backoff until it succeeds or the executor stops.
func (e *Executor) handleDeadLetter(ctx context.Context, d broker.Delivery) error {
	dl := parseDeadLetter(d)
	wait := 100 * time.Millisecond
	for {
		err := e.recordDeadLetter(ctx, dl, d)
		if err == nil || ctx.Err() != nil {
			return err
		}
		e.log.Warn("dead letter not recorded yet; retrying", "queue", dl.Queue, "reason", dl.Reason, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, deadLetterRetryMax)
	}
}

// recordDeadLetter writes the record (once per death) and settles the
// execution of a dead dispatch.
func (e *Executor) recordDeadLetter(ctx context.Context, dl store.DeadLetter, d broker.Delivery) error {
	id, created, err := e.store.RecordDeadLetter(ctx, dl)
	if err != nil {
		return fmt.Errorf("record dead letter from %s: %w", dl.Queue, err)
	}
	if created {
		e.log.Warn("dead letter recorded", "id", id, "queue", dl.Queue, "reason", dl.Reason, "type", dl.MessageType,
			"execution", dl.ExecutionID)
	}
	return e.settleDeadDispatch(ctx, dl, d)
}

// settleDeadDispatch fails an execution whose dispatch died in its worker's
// queue, but only while the execution is still scheduled for that worker
// and attempt: a newer state (started, re-dispatched, finished, timed out
// by the monitor) is never overwritten. With a queue_expired retry policy
// the failure is followed by a retry on another worker.
func (e *Executor) settleDeadDispatch(ctx context.Context, dl store.DeadLetter, d broker.Delivery) (err error) {
	defer func() {
		// The record is written; a panic here must not drop the message
		// into a requeue loop or kill the consumer.
		if r := recover(); r != nil {
			e.log.Error("dead-letter handler panic", "queue", dl.Queue, "panic", r)
			err = nil
		}
	}()
	if d.Type != messages.TypeExecutionDispatch {
		return nil
	}
	var m messages.ExecutionDispatch
	if json.Unmarshal(d.Body, &m) != nil || m.ExecutionID <= 0 || m.WorkerID == "" || dl.Queue != broker.WorkerQueue(m.WorkerID) {
		return nil
	}
	reason := ReasonExpiredInQueue
	if dl.Reason != "expired" {
		reason = "dispatch dead-lettered from worker queue (" + dl.Reason + ")"
	}
	fin, adm, err := e.store.Finish(ctx, m.ExecutionID, []string{store.StatusScheduled},
		&store.Fence{WorkerID: m.WorkerID, Attempt: m.Attempt},
		store.Outcome{Status: store.StatusFailed, Reason: reason, Error: &reason})
	if err != nil || !fin {
		return err
	}
	e.log.Warn("execution failed: dispatch dead-lettered", "execution", m.ExecutionID, "worker", m.WorkerID, "reason", dl.Reason)
	e.svc.Wake(ctx, adm)
	e.decideRetryLogged(ctx, m.ExecutionID)
	e.svc.announceFinal(ctx, m.ExecutionID, store.StatusFailed, m.WorkerID, m.Attempt)
	return nil
}

// parseDeadLetter reads what RabbitMQ says about a death from the x-death
// header (its first entry is the latest death) with x-first-death-* as the
// fallback, and the execution id from the body when it is JSON with one.
func parseDeadLetter(d broker.Delivery) store.DeadLetter {
	var death amqp.Table
	if deaths, ok := d.Headers["x-death"].([]any); ok && len(deaths) > 0 {
		death, _ = deaths[0].(amqp.Table)
	}
	dl := store.DeadLetter{
		Queue:       firstString(death["queue"], d.Headers["x-first-death-queue"]),
		Exchange:    firstString(death["exchange"], d.Headers["x-first-death-exchange"]),
		Reason:      firstString(death["reason"], d.Headers["x-first-death-reason"], "unknown"),
		RoutingKey:  d.RoutingKey,
		DeathCount:  1,
		MessageType: d.Type,
		MessageID:   d.MessageId,
		Payload:     d.Body,
		Headers:     headersJSON(d.Headers),
	}
	if keys, ok := death["routing-keys"].([]any); ok && len(keys) > 0 {
		if k, ok := keys[0].(string); ok {
			dl.RoutingKey = k
		}
	}
	switch n := death["count"].(type) {
	case int64:
		dl.DeathCount = n
	case int32:
		dl.DeathCount = int64(n)
	}
	if t, ok := death["time"].(time.Time); ok {
		dl.FirstDeathAt = &t
	}
	var body struct {
		ExecutionID *int64 `json:"execution_id"`
	}
	if json.Unmarshal(d.Body, &body) == nil && body.ExecutionID != nil && *body.ExecutionID > 0 {
		dl.ExecutionID = body.ExecutionID
	}
	if d.MessageId != "" {
		var at int64
		if dl.FirstDeathAt != nil {
			at = dl.FirstDeathAt.Unix()
		}
		dl.DedupeKey = d.MessageId + "|" + dl.Queue + "|" + dl.Reason + "|" + strconv.FormatInt(dl.DeathCount, 10) + "|" + strconv.FormatInt(at, 10)
	}
	return dl
}

// firstString returns the first non-empty string among vs ("" if none).
func firstString(vs ...any) string {
	for _, v := range vs {
		if s, ok := v.(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// headersJSON renders AMQP headers as JSON for the record: times as RFC
// 3339, byte strings as text when they are UTF-8 JSON-safe, else base64.
func headersJSON(h amqp.Table) json.RawMessage {
	b, err := json.Marshal(jsonable(h))
	if err != nil || len(h) == 0 {
		return json.RawMessage(`{}`)
	}
	return b
}

func jsonable(v any) any {
	switch x := v.(type) {
	case amqp.Table:
		out := make(map[string]any, len(x))
		for k, val := range x {
			out[k] = jsonable(val)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = jsonable(val)
		}
		return out
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case []byte:
		return base64.StdEncoding.EncodeToString(x)
	case amqp.Decimal:
		return float64(x.Value) / math.Pow10(int(x.Scale))
	}
	return v
}
