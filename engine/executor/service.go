// Package executor claims, admits and dispatches executions, and runs the
// recovery loops. All coordination state lives in PostgreSQL (engine/store),
// so any number of executor replicas can run side by side.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// ErrUnknownAction is returned for a request naming no registered action.
var ErrUnknownAction = errors.New("unknown action")

// Service is the executor-side API used by the HTTP layer: requests,
// cancels and policy changes, each followed by the wake-up messages its
// transaction calls for.
type Service struct {
	store          *store.Store
	pub            messages.Publisher
	log            *slog.Logger
	maxQueueLength int

	batcher *requestBatcher

	rateMu    sync.Mutex
	rateTimer *time.Timer
	rateAt    time.Time
}

// NewService creates a Service. maxQueueLength is the default for actions
// whose policy sets none.
func NewService(st *store.Store, pub messages.Publisher, log *slog.Logger, maxQueueLength int) *Service {
	s := &Service{store: st, pub: pub, log: log, maxQueueLength: maxQueueLength}
	s.batcher = newRequestBatcher(s)
	return s
}

// Store exposes the store for read-only queries.
func (s *Service) Store() *store.Store { return s.store }

// RunRequest is a request to run an action.
type RunRequest struct {
	ActionRef      string         `json:"action_ref"`
	Parameters     map[string]any `json:"parameters"`
	TimeoutSeconds *float64       `json:"timeout,omitempty"`
	RetryOf        *int64         `json:"-"`
	Attempt        int            `json:"-"`
}

// RequestExecution validates parameters against the action's schema
// (defaults applied), records the execution in its FIFO queue and publishes
// execution.requested. Errors: ErrUnknownAction, *params.ValidationError,
// store.ErrQueueFull.
func (s *Service) RequestExecution(ctx context.Context, r RunRequest) (store.Execution, error) {
	if r.TimeoutSeconds != nil && *r.TimeoutSeconds < 0 {
		return store.Execution{}, &params.ValidationError{Fields: []params.FieldError{{Field: "timeout", Message: "must not be negative"}}}
	}
	action, err := s.store.GetAction(ctx, r.ActionRef)
	if errors.Is(err, store.ErrNotFound) {
		return store.Execution{}, fmt.Errorf("%w: %s", ErrUnknownAction, r.ActionRef)
	}
	if err != nil {
		return store.Execution{}, err
	}
	schema, err := params.CompileCached(action.Parameters)
	if err != nil {
		return store.Execution{}, fmt.Errorf("action %s has an invalid parameter schema: %w", action.Ref, err)
	}
	if r.Parameters == nil {
		r.Parameters = map[string]any{}
	}
	full, err := schema.Apply(r.Parameters)
	if err != nil {
		return store.Execution{}, err
	}
	body, err := json.Marshal(full)
	if err != nil {
		return store.Execution{}, err
	}
	maxQ := s.maxQueueLength
	if action.Policy.MaxQueueLength != nil {
		maxQ = *action.Policy.MaxQueueLength
	}
	id, err := s.batcher.submit(ctx, store.Request{
		ActionRef:      action.Ref,
		Parameters:     body,
		GroupKey:       params.GroupKey(action.Policy.Concurrency.GroupBy, full),
		MaxQueueLength: maxQ,
		TimeoutSeconds: r.TimeoutSeconds,
		RetryOf:        r.RetryOf,
		Attempt:        r.Attempt,
	})
	if err != nil {
		return store.Execution{}, err
	}
	if err := messages.PublishRequested(ctx, s.pub, id); err != nil {
		// Committed but not announced: the re-driver publishes it again.
		s.log.Warn("publish execution.requested failed; the re-driver will retry", "execution", id, "err", err)
	}
	return s.store.GetExecution(ctx, id)
}

// Wake publishes execution.requested for heads an admission promoted out of
// queued, and arms a timer for a rate window that reopens later. A lost
// publish is not fatal: the promoted row sits in scheduling and the
// re-driver republishes it.
func (s *Service) Wake(ctx context.Context, adm store.Admission) {
	for _, id := range adm.Woken {
		if err := messages.PublishRequested(ctx, s.pub, id); err != nil {
			s.log.Warn("publish wake-up failed; the re-driver will retry", "execution", id, "err", err)
		}
	}
	if adm.NextWindowAt != nil {
		s.armRateTimer(*adm.NextWindowAt)
	}
}

// armRateTimer wakes rate-limited queues when their window reopens: one
// timer for the earliest known reopening, no polling per execution.
func (s *Service) armRateTimer(at time.Time) {
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	if s.rateTimer != nil && !s.rateAt.IsZero() && !at.Before(s.rateAt) {
		return
	}
	if s.rateTimer != nil {
		s.rateTimer.Stop()
	}
	s.rateAt = at
	s.rateTimer = time.AfterFunc(time.Until(at)+5*time.Millisecond, func() {
		s.rateMu.Lock()
		s.rateAt = time.Time{}
		s.rateMu.Unlock()
		s.AdmitRateLimited(context.Background())
	})
}

// AdmitRateLimited admits heads of every rate-limited queue whose window
// has reopened.
func (s *Service) AdmitRateLimited(ctx context.Context) {
	queues, err := s.store.RateLimitedQueues(ctx)
	if err != nil {
		s.log.Warn("rate-limited queues", "err", err)
		return
	}
	for _, q := range queues {
		adm, err := s.store.AdmitHeads(ctx, q[0], q[1])
		if err != nil {
			s.log.Warn("admit rate-limited heads", "action", q[0], "group", q[1], "err", err)
			continue
		}
		s.Wake(ctx, adm)
	}
}

// CancelExecution cancels at once what has not started and asks the worker
// to stop what runs. Errors: store.ErrNotFound, store.ErrConflict (finished).
func (s *Service) CancelExecution(ctx context.Context, id int64) (store.Execution, error) {
	res, err := s.store.Cancel(ctx, id, "cancelled by request")
	if err != nil {
		return store.Execution{}, err
	}
	if res.Cancelled {
		s.Wake(ctx, res.Admission)
		s.announceFinal(ctx, id, store.StatusCancelled, "", 0)
	}
	if res.Canceling && res.WorkerID != "" {
		if err := messages.PublishCancel(ctx, s.pub, messages.ExecutionCancel{ExecutionID: id, WorkerID: res.WorkerID, Attempt: res.Attempt}); err != nil {
			s.log.Warn("publish cancel failed; the worker's heartbeat check will pick it up", "execution", id, "err", err)
		}
	}
	return s.store.GetExecution(ctx, id)
}

// settle ends an execution (a compare-and-swap from one of from, optionally
// fenced), wakes the heads its freed slot promoted and announces the final
// status. finished is false when another actor settled it first.
func (s *Service) settle(ctx context.Context, id int64, from []string, fence *store.Fence, o store.Outcome) (finished bool, err error) {
	fin, adm, err := s.store.Finish(ctx, id, from, fence, o)
	if err != nil || !fin {
		return false, err
	}
	s.Wake(ctx, adm)
	worker, attempt := "", 0
	if fence != nil {
		worker, attempt = fence.WorkerID, fence.Attempt
	}
	s.announceFinal(ctx, id, o.Status, worker, attempt)
	return true, nil
}

// announceFinal tells executors (retries) and dashboards about a final status.
func (s *Service) announceFinal(ctx context.Context, id int64, status, worker string, attempt int) {
	if err := messages.PublishCompleted(ctx, s.pub, messages.ExecutionCompleted{ExecutionID: id, Status: status, WorkerID: worker, Attempt: attempt}); err != nil {
		s.log.Warn("publish execution.completed failed", "execution", id, "err", err)
	}
}

// RegisterAction registers or replaces an action; a raised limit admits
// waiting heads at once.
func (s *Service) RegisterAction(ctx context.Context, a store.Action) (store.Action, error) {
	adm, err := s.store.UpsertAction(ctx, a)
	if err != nil {
		return store.Action{}, err
	}
	s.Wake(ctx, adm)
	return s.store.GetAction(ctx, a.Ref)
}

// SetPolicy replaces an action's admission policy.
func (s *Service) SetPolicy(ctx context.Context, ref string, p store.Policy) (store.Policy, error) {
	adm, err := s.store.SetPolicy(ctx, ref, p)
	if err != nil {
		return store.Policy{}, err
	}
	s.Wake(ctx, adm)
	a, err := s.store.GetAction(ctx, ref)
	return a.Policy, err
}

// SetPaused pauses or resumes an action's queues.
func (s *Service) SetPaused(ctx context.Context, ref string, paused bool) (store.Policy, error) {
	adm, err := s.store.SetPaused(ctx, ref, paused)
	if err != nil {
		return store.Policy{}, err
	}
	s.Wake(ctx, adm)
	a, err := s.store.GetAction(ctx, ref)
	return a.Policy, err
}
