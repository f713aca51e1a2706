package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
)

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Status is the worker's status as of its last registration or heartbeat
// (see the package documentation).
func (w *Worker) Status() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

func (w *Worker) setStatus(s string) {
	w.mu.Lock()
	w.status = s
	w.mu.Unlock()
}

// register records the worker as started. The database keeps an operator's
// cordon or drain (see store.RegisterWorker).
func (w *Worker) register(ctx context.Context) error {
	status, err := w.store.RegisterWorkerStatus(ctx, store.Worker{ID: w.cfg.ID, Host: w.host, Runtimes: w.cfg.Runtimes,
		Capacity: w.cfg.Capacity, Version: w.cfg.Version})
	if err != nil {
		return err
	}
	w.setStatus(status)
	if status != store.WorkerActive {
		w.log.Warn("worker registered but takes no new work until an operator uncordons it", "status", status)
	}
	return nil
}

// releaseLeftovers settles what a previous process with this worker id was
// running when it died: it cannot report those results any more. Scheduled
// executions stay: their dispatches wait in the durable queue and are
// consumed next.
func (w *Worker) releaseLeftovers(ctx context.Context) error {
	rows, err := w.store.RunningOn(ctx, w.cfg.ID)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Status != store.StatusRunning && r.Status != store.StatusCanceling {
			continue
		}
		reason := fmt.Sprintf("worker %s restarted while the execution was running", w.cfg.ID)
		to := store.StatusAbandoned
		if r.Status == store.StatusCanceling {
			to = store.StatusCancelled
		}
		fin, adm, err := w.store.Finish(ctx, r.ID, []string{r.Status}, &store.Fence{WorkerID: w.cfg.ID, Attempt: r.Attempt},
			store.Outcome{Status: to, Reason: reason, Error: &reason})
		if err != nil {
			return err
		}
		if !fin {
			continue
		}
		w.log.Warn("execution of the previous worker process settled", "execution", r.ID, "status", to)
		w.wake(ctx, adm)
		if err := messages.PublishCompleted(ctx, w.pub, messages.ExecutionCompleted{ExecutionID: r.ID, Status: to, WorkerID: w.cfg.ID, Attempt: r.Attempt}); err != nil {
			w.log.Warn("publish execution.completed failed", "execution", r.ID, "err", err)
		}
	}
	return nil
}

// heartbeatLoop refreshes the heartbeat every interval and reacts to the
// status it reads back: it registers again when it was declared dead while
// alive, finishes an operator drain once nothing is assigned any more, and,
// as a backstop for lost cancel messages, stops local executions the
// database says are canceling.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.beat(ctx)
	}
}

// beat is one heartbeat and what follows from it.
func (w *Worker) beat(ctx context.Context) {
	status, err := w.store.Heartbeat(ctx, w.cfg.ID, w.Running())
	switch {
	case errors.Is(err, store.ErrNotFound):
		w.log.Warn("worker row is gone; registering again")
		if err := w.register(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("register worker", "err", err)
		}
		return
	case err != nil:
		if ctx.Err() == nil {
			w.log.Warn("heartbeat failed", "err", err)
		}
		return
	}
	w.setStatus(status)
	if !w.stopping.Load() {
		switch status {
		case store.WorkerInactive:
			// Our heartbeats were late and the reaper settled our work; the
			// results still coming will be rejected. Take new work again.
			w.log.Warn("worker was declared dead while alive (late heartbeats); registering again")
			if err := w.register(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("register worker", "err", err)
			}
		case store.WorkerDraining:
			if w.Running() == 0 {
				if done, err := w.store.MarkWorkerDrained(ctx, w.cfg.ID); err != nil {
					w.log.Warn("finish drain", "err", err)
				} else if done {
					w.setStatus(store.WorkerDrained)
					w.log.Info("worker drained: nothing in flight, taking no new work until uncordoned")
				}
			}
		}
	}
	rows, err := w.store.RunningOn(ctx, w.cfg.ID)
	if err != nil {
		return
	}
	for _, r := range rows {
		if r.Status == store.StatusCanceling {
			w.cancelLocal(r.ID, "cancelled by request")
		}
	}
}

// Stop shuts the worker down gracefully: it is marked draining so no new
// work is dispatched to it, stops consuming (undelivered dispatches stay in
// its durable queue), lets in-flight executions finish for up to
// ShutdownTimeout, cancels the rest with the reason "worker shutting down",
// and marks itself inactive (or keeps an operator's cordoned/drained). It
// heartbeats until the end, so the reaper does not take it for dead while
// it drains. Calling Stop again does nothing.
func (w *Worker) Stop(ctx context.Context) {
	if w.consumeCancel == nil {
		return
	}
	w.stopOnce.Do(func() { w.stop(ctx) })
}

func (w *Worker) stop(ctx context.Context) {
	w.stopping.Store(true)
	if err := w.store.MarkWorkerStopping(ctx, w.cfg.ID); err != nil {
		w.log.Warn("mark draining", "err", err)
	}
	w.log.Info("worker stopping: no new work, finishing in-flight executions", "running", w.Running(), "timeout", w.cfg.ShutdownTimeout)
	deadline := time.Now().Add(w.cfg.ShutdownTimeout)
	// Executors pick workers from a cache that may predate the mark: what
	// they send meanwhile is still taken and run here.
	time.Sleep(min(w.cfg.StopGrace, w.cfg.ShutdownTimeout))
	w.consumeCancel() // the consumer stops taking messages, then waits for its handlers
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		w.log.Warn("shutdown timeout: cancelling in-flight executions", "running", w.Running())
		w.runCancel(fmt.Errorf("worker shutting down (shutdown_timeout %s reached)", w.cfg.ShutdownTimeout))
		<-done
	}
	w.stopLoops()
	w.loops.Wait()
	status, err := w.store.MarkWorkerStopped(ctx, w.cfg.ID)
	if err != nil {
		w.log.Warn("mark inactive", "err", err)
	}
	w.setStatus(status)
	w.log.Info("worker stopped", "status", status)
}
