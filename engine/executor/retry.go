package executor

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/attune-io/attune/engine/packs"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// Retries (docs/retries.md). A retry is a new execution with attempt+1 and
// retry_of pointing at the attempt it retries. The decision is recorded on
// the finished attempt (retry_state, retry_at) before any timer is armed,
// so a backoff survives a crash: the recovery loop requests every retry
// that is due, whichever executor planned it. The unique index on retry_of
// makes the request itself happen once, even when two executors or a
// replay race for it.
//
// Where a retry stands in its FIFO queue: it is requested like any new
// execution when its backoff ends, so it joins the TAIL of its (action,
// group) queue at that moment. It does not hold a slot or a queue place
// while it waits, and it never jumps ahead of executions requested before
// it was due.

// reasonNotPickedUp is the reason the timeout monitor fails an execution
// that stayed scheduled too long; it counts as queue_expired for retries.
const reasonNotPickedUp = "worker did not pick up the execution"

// retryLease is how long an executor owns a due retry while it requests
// it; if that executor dies, another takes over after the lease.
const retryLease = 30 * time.Second

// undecidedWindow bounds how far back the loop looks for finished attempts
// whose completion was never handled.
const undecidedWindow = time.Hour

// retryJitter is the ±fraction applied to every backoff so retries of many
// executions that failed together do not return together.
const retryJitter = 0.2

// retryPolicy decodes an action's retry policy and fills the defaults of
// engine/packs; ok is false when the action does not retry at all. spec
// is returned even then, so callers can tell "no policy" (MaxRetries 0)
// from a policy that retries on nothing.
func retryPolicy(raw json.RawMessage) (spec packs.RetrySpec, ok bool) {
	if len(raw) == 0 || json.Unmarshal(raw, &spec) != nil {
		return packs.RetrySpec{}, false
	}
	if spec.MaxRetries <= 0 || len(spec.RetryOn) == 0 {
		return spec, false
	}
	if spec.Backoff.Initial <= 0 {
		spec.Backoff.Initial = packs.DefaultBackoffInitial
	}
	if spec.Backoff.Max <= 0 {
		spec.Backoff.Max = max(packs.DefaultBackoffMax, spec.Backoff.Initial)
	}
	if spec.Backoff.Multiplier < 1 {
		spec.Backoff.Multiplier = packs.DefaultBackoffMultiplier
	}
	return spec, true
}

// retryCause names the retry_on value that covers how an attempt ended, or
// "" for outcomes that are never retried (success, cancel, no worker for the
// runtime at all, a dispatch a worker rejected).
func retryCause(f store.Finished) string {
	switch f.Status {
	case store.StatusTimeout:
		return packs.RetryOnTimeout
	case store.StatusAbandoned:
		return packs.RetryOnWorkerLost
	case store.StatusFailed:
		if f.Started {
			return packs.RetryOnFailed
		}
		// Never reached a worker: the executor failed it. Only a dispatch
		// that was not taken in time is a transient, retryable cause.
		if f.Reason == ReasonExpiredInQueue || f.Reason == reasonNotPickedUp {
			return packs.RetryOnQueueExpired
		}
	}
	return ""
}

// backoff is the delay before retrying attempt n (1-based): initial ×
// multiplier^(n-1), jittered by ±20% (jitter in [-1, 1]) and never above max.
func backoff(spec packs.RetrySpec, attempt int, jitter float64) time.Duration {
	d := float64(spec.Backoff.Initial) * math.Pow(spec.Backoff.Multiplier, float64(max(attempt-1, 0)))
	d = min(d, float64(spec.Backoff.Max))
	d = min(d*(1+retryJitter*jitter), float64(spec.Backoff.Max))
	return time.Duration(d * float64(time.Second))
}

// retryTimers wakes the retry loop when a planned backoff ends, so a retry
// runs on time instead of at the next recovery pass. Timers are only an
// accelerator: the plan is in the database.
type retryTimers struct {
	mu  sync.Mutex
	ctx context.Context
}

// start remembers the executor's run context; timers do nothing after it ends.
func (r *retryTimers) start(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
}

func (r *retryTimers) context() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx
}

// decideRetry records whether a finished attempt is retried, once per
// attempt, and arms a timer for a planned retry. Attempts of actions
// without a retry policy are left undecided (no write on the hot path).
func (e *Executor) decideRetry(ctx context.Context, id int64) error {
	f, err := e.store.GetFinished(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !store.IsFinal(f.Status) || f.RetryState != "" || f.HasSuccessor {
		return nil
	}
	spec, ok := retryPolicy(f.Retry)
	if !ok && spec.MaxRetries <= 0 {
		return nil
	}
	cause := retryCause(f)
	if !ok || cause == "" || !slices.Contains(spec.RetryOn, cause) || f.Attempt > spec.MaxRetries {
		_, err := e.store.DecideRetry(ctx, id, store.RetryNone, 0)
		return err
	}
	delay := backoff(spec, f.Attempt, rand.Float64()*2-1)
	won, err := e.store.DecideRetry(ctx, id, store.RetryPending, delay)
	if err != nil || !won {
		return err
	}
	e.log.Info("retry planned", "execution", id, "cause", cause, "attempt", f.Attempt+1, "of", spec.MaxRetries+1, "in", delay)
	run := e.retries.context()
	time.AfterFunc(delay+5*time.Millisecond, func() {
		if run != nil && run.Err() == nil {
			e.logRetryErr(e.requestDueRetries(run))
		}
	})
	return nil
}

// decideRetryLogged is decideRetry for paths that must not fail because of
// it; the recovery loop's sweep decides later if this one could not.
func (e *Executor) decideRetryLogged(ctx context.Context, id int64) {
	if err := e.decideRetry(ctx, id); err != nil && ctx.Err() == nil {
		e.log.Warn("retry decision failed; the recovery loop will decide", "execution", id, "err", err)
	}
}

func (e *Executor) logRetryErr(err error) {
	if err != nil {
		e.log.Warn("requesting due retries failed; the recovery loop will try again", "err", err)
	}
}

// retryLoop is the recovery pass for retries: it decides attempts whose
// completion message was lost and requests the retries that are due.
func (e *Executor) retryLoop(ctx context.Context) error {
	ids, err := e.store.UndecidedRetries(ctx, max(e.cfg.RedriveAfter, time.Second), undecidedWindow, 200)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.decideRetry(ctx, id); err != nil {
			return err
		}
	}
	return e.requestDueRetries(ctx)
}

// requestDueRetries leases the retries whose backoff has ended and requests
// each through the Service, i.e. at the tail of its FIFO queue.
func (e *Executor) requestDueRetries(ctx context.Context) error {
	ids, err := e.store.ClaimDueRetries(ctx, retryLease, 100)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := e.requestRetry(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// requestRetry requests the retry of one attempt. A retry that can never
// be requested (the action is gone, its parameters no longer validate) is
// settled as none; a transient failure (queue full, database) keeps it
// pending, due again when its lease ends.
func (e *Executor) requestRetry(ctx context.Context, id int64) error {
	f, err := e.store.GetFinished(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if f.HasSuccessor {
		return e.store.SettleRetry(ctx, id, store.RetryDone)
	}
	var p map[string]any
	_ = json.Unmarshal(f.Parameters, &p)
	next, err := e.svc.RequestExecution(ctx, RunRequest{ActionRef: f.ActionRef, Parameters: p,
		TimeoutSeconds: f.TimeoutSeconds, RetryOf: &f.ID, Attempt: f.Attempt + 1})
	var verr *params.ValidationError
	switch {
	case err == nil:
		e.log.Info("retry requested", "execution", id, "retry", next.ID, "attempt", next.Attempt)
		return e.store.SettleRetry(ctx, id, store.RetryDone)
	case errors.Is(err, ErrUnknownAction), errors.As(err, &verr):
		e.log.Warn("retry abandoned: cannot request it", "execution", id, "err", err)
		return e.store.SettleRetry(ctx, id, store.RetryNone)
	case errors.Is(err, store.ErrConflict):
		// Another executor or a replay created the successor first; or a
		// transient serialization failure, then it stays pending.
		if _, serr := e.store.SuccessorOf(ctx, id); serr == nil {
			return e.store.SettleRetry(ctx, id, store.RetryDone)
		}
		return nil
	case errors.Is(err, store.ErrQueueFull):
		e.log.Warn("retry waits: its queue is full", "execution", id, "again_in", retryLease)
		return nil
	default:
		return err
	}
}
