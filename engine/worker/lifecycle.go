package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/attune-io/attune/engine/store"
)

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// heartbeatLoop refreshes the heartbeat and, as a backstop for lost cancel
// messages, stops local executions the database says are canceling.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if _, err := w.store.Heartbeat(ctx, w.cfg.ID, w.Running()); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				_ = w.store.RegisterWorker(ctx, store.Worker{ID: w.cfg.ID, Runtimes: w.cfg.Runtimes, Capacity: w.cfg.Capacity, Version: w.cfg.Version})
			} else if ctx.Err() == nil {
				w.log.Warn("heartbeat failed", "err", err)
			}
			continue
		}
		rows, err := w.store.RunningOn(ctx, w.cfg.ID)
		if err != nil {
			continue
		}
		for _, r := range rows {
			if r.Status == store.StatusCanceling {
				w.cancelLocal(r.ID, "cancelled by request")
			}
		}
	}
}

// Stop shuts the worker down gracefully: it is marked draining so no new
// work is dispatched to it, stops consuming, lets in-flight executions
// finish for up to ShutdownTimeout, cancels the rest with a reason, and
// marks itself inactive.
func (w *Worker) Stop(ctx context.Context) {
	if w.consumeCancel == nil {
		return
	}
	if _, err := w.store.SetWorkerStatus(ctx, w.cfg.ID, store.WorkerDraining); err != nil {
		w.log.Warn("mark draining", "err", err)
	}
	w.consumeCancel() // consumers stop taking messages, then wait for their handlers
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(w.cfg.ShutdownTimeout):
		w.log.Warn("shutdown timeout: cancelling in-flight executions", "running", w.Running())
		w.runCancel(errors.New("worker shutting down"))
		<-done
	}
	w.stopLoops()
	w.loops.Wait()
	if _, err := w.store.SetWorkerStatus(ctx, w.cfg.ID, store.WorkerInactive); err != nil {
		w.log.Warn("mark inactive", "err", err)
	}
	w.log.Info("worker stopped")
}
