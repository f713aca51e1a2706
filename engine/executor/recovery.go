package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
)

// recoveryLoop runs the loops that make sure nothing waits forever. Every
// statement they run is conditional, so any number of replicas may run
// them at once.
func (e *Executor) recoveryLoop(ctx context.Context) {
	t := time.NewTicker(e.cfg.LoopInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.RecoverOnce(ctx)
	}
}

// RecoverOnce runs one pass of every recovery loop (exported for tests).
func (e *Executor) RecoverOnce(ctx context.Context) {
	for name, step := range map[string]func(context.Context) error{
		"redrive":           e.redriveStale,
		"scheduled timeout": e.failScheduledTooLong,
		"queue timeout":     e.evictQueueTimeouts,
		"dead workers":      e.reapDeadWorkers,
		"retries":           e.retryLoop,
	} {
		if err := step(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("recovery loop failed", "loop", name, "err", err)
		}
	}
	e.svc.AdmitRateLimited(ctx)
}

// redriveStale republishes the message of rows whose message may have been
// lost between commit and publish (or by a crash of the one handling it).
func (e *Executor) redriveStale(ctx context.Context) error {
	stale, err := e.store.ClaimStale(ctx, e.cfg.RedriveAfter, 500)
	if err != nil {
		return err
	}
	for _, s := range stale {
		switch s.Status {
		case store.StatusRequested, store.StatusScheduling:
			err = messages.PublishRequested(ctx, e.pub, s.ID)
		case store.StatusScheduled:
			// Duplicate dispatches are harmless: the worker's start is fenced.
			err = messages.PublishDispatch(ctx, e.pub, messages.ExecutionDispatch{ExecutionID: s.ID, WorkerID: s.WorkerID, Attempt: s.Attempt})
			if errors.Is(err, broker.ErrUnroutable) {
				err = e.undispatch(ctx, s.ID, s.WorkerID, err)
			}
		}
		if err != nil {
			return fmt.Errorf("re-drive execution %d: %w", s.ID, err)
		}
		e.log.Info("re-drove stale execution", "execution", s.ID, "status", s.Status)
	}
	return nil
}

// failScheduledTooLong fails executions no worker picked up in time.
func (e *Executor) failScheduledTooLong(ctx context.Context) error {
	rows, err := e.store.ScheduledTooLong(ctx, e.cfg.ScheduledTimeout, 500)
	if err != nil {
		return err
	}
	for _, s := range rows {
		reason := reasonNotPickedUp
		fin, err := e.svc.settle(ctx, s.ID, []string{store.StatusScheduled}, &store.Fence{WorkerID: s.WorkerID, Attempt: s.Attempt},
			store.Outcome{Status: store.StatusFailed, Reason: reason, Error: &reason})
		if err != nil {
			return err
		}
		if fin {
			e.log.Warn("execution failed: not picked up", "execution", s.ID, "worker", s.WorkerID)
		}
	}
	return nil
}

// evictQueueTimeouts cancels executions that waited for a slot too long.
func (e *Executor) evictQueueTimeouts(ctx context.Context) error {
	ids, err := e.store.QueueTimedOut(ctx, e.cfg.QueueTimeout, 500)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := e.svc.settle(ctx, id, []string{store.StatusQueued, store.StatusRequested, store.StatusScheduling}, nil,
			store.Outcome{Status: store.StatusCancelled, Reason: "queue timeout"}); err != nil {
			return err
		}
	}
	return nil
}

// reapDeadWorkers marks workers with a stale heartbeat inactive; their
// running executions are abandoned (slots freed; retried as a new attempt
// when the action's retry policy lists worker_lost) and their scheduled
// ones go back to requested for another worker.
func (e *Executor) reapDeadWorkers(ctx context.Context) error {
	maxAge := 3 * e.cfg.HeartbeatInterval
	dead, err := e.store.StaleWorkers(ctx, maxAge)
	if err != nil {
		return err
	}
	for _, w := range dead {
		e.log.Warn("worker lost: no heartbeat", "worker", w, "for_more_than", maxAge)
		if err := e.ReleaseWorker(ctx, w, fmt.Sprintf("worker %s lost (no heartbeat for %s)", w, maxAge)); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseWorker settles every unfinished execution assigned to an inactive
// worker.
func (e *Executor) ReleaseWorker(ctx context.Context, worker, reason string) error {
	rows, err := e.store.RunningOn(ctx, worker)
	if err != nil {
		return err
	}
	e.workers.forget(worker)
	for _, s := range rows {
		fence := &store.Fence{WorkerID: worker, Attempt: s.Attempt}
		switch s.Status {
		case store.StatusScheduled:
			if _, err := e.store.ReturnToRequested(ctx, s.ID, worker, reason+"; re-dispatching"); err != nil {
				return err
			}
			if err := messages.PublishRequested(ctx, e.pub, s.ID); err != nil {
				e.log.Warn("re-request failed; the re-driver will retry", "execution", s.ID, "err", err)
			}
		case store.StatusRunning, store.StatusCanceling:
			to := store.StatusAbandoned
			if s.Status == store.StatusCanceling {
				to = store.StatusCancelled
			}
			fin, adm, err := e.store.Finish(ctx, s.ID, []string{s.Status}, fence, store.Outcome{Status: to, Reason: reason, Error: &reason})
			if err != nil {
				return err
			}
			if fin {
				e.svc.Wake(ctx, adm)
				if to == store.StatusAbandoned {
					e.decideRetryLogged(ctx, s.ID)
				}
				e.svc.announceFinal(ctx, s.ID, to, worker, s.Attempt)
			}
		}
	}
	return nil
}
