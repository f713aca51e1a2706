package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/store"
)

// ErrCannotReplay is returned (wrapping store.ErrConflict, so the API
// answers 409) when a dead letter may not be replayed: it was replayed
// already, its execution is still in flight or succeeded, or the execution
// was already retried.
var ErrCannotReplay = fmt.Errorf("%w: cannot replay dead letter", store.ErrConflict)

// ReplayDeadLetter replays one dead letter, at most once (the record's
// replayed_at is claimed first; a failed replay releases it again):
//
//   - a dead letter of an execution re-requests that execution as a NEW
//     execution (attempt+1, retry_of = the original) through
//     RequestExecution, so it passes admission and joins the tail of its
//     FIFO queue; the original must be finished and not succeeded. A retry
//     and a replay of one attempt exclude each other (one successor per
//     attempt).
//   - any other dead letter is republished, body and type unchanged, to the
//     exchange and routing key it was first published with (mandatory, so a
//     key that routes nowhere fails the replay instead of vanishing).
//
// Errors: store.ErrNotFound, ErrCannotReplay, store.ErrQueueFull,
// ErrUnknownAction, broker.ErrUnroutable.
func (s *Service) ReplayDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error) {
	dl, ok, err := s.store.ClaimReplay(ctx, id)
	if err != nil {
		return store.DeadLetter{}, err
	}
	if !ok {
		return store.DeadLetter{}, fmt.Errorf("%w: dead letter %d was already replayed", ErrCannotReplay, id)
	}
	if dl.ExecutionID != nil {
		err = s.replayExecution(ctx, &dl)
	} else {
		err = s.republish(ctx, dl)
	}
	if err != nil {
		if uerr := s.store.UnclaimReplay(context.WithoutCancel(ctx), id); uerr != nil {
			s.log.Warn("releasing a failed replay", "dead_letter", id, "err", uerr)
		}
		return store.DeadLetter{}, err
	}
	return s.store.GetDeadLetter(ctx, id)
}

// replayExecution requests the successor of the dead letter's execution and
// links the record to it.
func (s *Service) replayExecution(ctx context.Context, dl *store.DeadLetter) error {
	orig, err := s.store.GetFinished(ctx, *dl.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: execution %d no longer exists", ErrCannotReplay, *dl.ExecutionID)
	}
	if err != nil {
		return err
	}
	switch {
	case !store.IsFinal(orig.Status):
		return fmt.Errorf("%w: execution %d is still %s", ErrCannotReplay, orig.ID, orig.Status)
	case orig.Status == store.StatusSucceeded:
		return fmt.Errorf("%w: execution %d succeeded; there is nothing to replay", ErrCannotReplay, orig.ID)
	case orig.HasSuccessor:
		return s.alreadyFollowed(ctx, orig.ID)
	}
	var p map[string]any
	_ = json.Unmarshal(orig.Parameters, &p)
	next, err := s.RequestExecution(ctx, RunRequest{ActionRef: orig.ActionRef, Parameters: p,
		TimeoutSeconds: orig.TimeoutSeconds, RetryOf: &orig.ID, Attempt: orig.Attempt + 1})
	if errors.Is(err, store.ErrConflict) {
		return s.alreadyFollowed(ctx, orig.ID)
	}
	if err != nil {
		return err
	}
	s.log.Info("dead letter replayed as a new execution", "dead_letter", dl.ID, "execution", orig.ID, "replay", next.ID)
	return s.store.SetReplayExecution(ctx, dl.ID, next.ID)
}

// alreadyFollowed explains a replay that lost to an existing successor.
func (s *Service) alreadyFollowed(ctx context.Context, id int64) error {
	succ, err := s.store.SuccessorOf(ctx, id)
	if err != nil {
		return fmt.Errorf("%w: execution %d is being retried; try again", ErrCannotReplay, id)
	}
	return fmt.Errorf("%w: execution %d was already retried or replayed as execution %d", ErrCannotReplay, id, succ)
}

// republish sends a dead letter without an execution back where it came
// from. It gets a new message id, and a header naming the record, so its
// own death (if it dies again) is a new record.
func (s *Service) republish(ctx context.Context, dl store.DeadLetter) error {
	key := dl.RoutingKey
	if dl.Exchange == "" && key == "" {
		key = dl.Queue // the default exchange routes by queue name
	}
	if dl.Exchange == "" && key == "" {
		return fmt.Errorf("%w: dead letter %d names neither an exchange nor a queue", ErrCannotReplay, dl.ID)
	}
	err := s.pub.Publish(ctx, dl.Exchange, key, broker.Message{Type: dl.MessageType, Body: dl.Payload, Mandatory: true,
		Headers: amqp.Table{"x-attune-replay-of": dl.ID}})
	if err != nil {
		return err
	}
	s.log.Info("dead letter republished", "dead_letter", dl.ID, "exchange", dl.Exchange, "routing_key", key)
	return nil
}
