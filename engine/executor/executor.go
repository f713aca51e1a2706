package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
)

// Config tunes an Executor.
type Config struct {
	NoWorkerWait      time.Duration // how long a request waits for a worker of its runtime before failing
	HeartbeatInterval time.Duration // workers' heartbeat interval; older than 3× = not eligible
	RedriveAfter      time.Duration // a requested/scheduling/scheduled row untouched this long is re-driven
	ScheduledTimeout  time.Duration // scheduled but never started this long → failed
	QueueTimeout      time.Duration // default queue_timeout for actions whose policy sets none
	Prefetch          int           // concurrent handlers per queue
	LoopInterval      time.Duration // recovery loop period; default RedriveAfter/2 capped at 5s
}

// withDefaults fills zero values.
func (c Config) withDefaults() Config {
	if c.NoWorkerWait < 0 {
		c.NoWorkerWait = 0
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.RedriveAfter <= 0 {
		c.RedriveAfter = 10 * time.Second
	}
	if c.ScheduledTimeout <= 0 {
		c.ScheduledTimeout = 5 * time.Minute
	}
	if c.QueueTimeout <= 0 {
		c.QueueTimeout = time.Hour
	}
	if c.Prefetch <= 0 {
		c.Prefetch = 64
	}
	if c.LoopInterval <= 0 {
		c.LoopInterval = min(c.RedriveAfter/2, 5*time.Second)
	}
	return c
}

// Executor consumes execution.requested and execution.completed and runs the
// recovery loops.
type Executor struct {
	cfg     Config
	svc     *Service
	store   *store.Store
	conn    *broker.Conn
	pub     messages.Publisher
	log     *slog.Logger
	workers *workerPool
	retries retryTimers // wakes the retry loop when a backoff ends (retry.go)

	wg     sync.WaitGroup
	cancel context.CancelFunc
	// Ready is closed once every consumer is subscribed (a test signal).
	Ready chan struct{}
}

// New creates an executor; Start runs it.
func New(cfg Config, svc *Service, conn *broker.Conn, log *slog.Logger) *Executor {
	cfg = cfg.withDefaults()
	return &Executor{
		cfg: cfg, svc: svc, store: svc.store, conn: conn, pub: svc.pub, log: log,
		workers: newWorkerPool(svc.store, 3*cfg.HeartbeatInterval),
		Ready:   make(chan struct{}),
	}
}

// Start subscribes the consumers (requests, completions, dead letters) and
// starts the recovery loops.
func (e *Executor) Start(ctx context.Context) {
	ctx, e.cancel = context.WithCancel(ctx)
	e.retries.start(ctx)
	var ready sync.WaitGroup
	ready.Add(3)
	consume := func(queue string, h broker.Handler) {
		var once sync.Once
		e.wg.Go(func() {
			_ = e.conn.Consume(ctx, broker.ConsumeOptions{
				Queue: queue, Prefetch: e.cfg.Prefetch, Declare: broker.DeclareExecutorQueues, Logger: e.log,
				OnReady: func() { once.Do(ready.Done) },
			}, h)
		})
	}
	consume(broker.QueueExecutionRequests, e.handleRequested)
	consume(broker.QueueExecutionCompleted, e.handleCompleted)
	e.wg.Go(func() { e.consumeDeadLetters(ctx, sync.OnceFunc(ready.Done)) })
	go func() { ready.Wait(); close(e.Ready) }()
	e.wg.Go(func() { e.recoveryLoop(ctx) })
}

// Stop stops consuming, waits for in-flight handlers and the loops.
func (e *Executor) Stop() {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
}

// handleRequested claims and dispatches one execution.
func (e *Executor) handleRequested(ctx context.Context, d broker.Delivery) error {
	if d.Type != "" && d.Type != messages.TypeExecutionRequested {
		return broker.Permanent(fmt.Errorf("unexpected message type %q on %s", d.Type, broker.QueueExecutionRequests))
	}
	m, err := messages.Decode[messages.ExecutionRequested](d)
	if err != nil {
		return err
	}
	if m.ExecutionID <= 0 {
		return broker.Permanent(errors.New("execution.requested without execution_id"))
	}
	claim, ok, err := e.store.ClaimForScheduling(ctx, m.ExecutionID)
	if err != nil || !ok {
		return err
	}
	return e.dispatch(ctx, claim)
}

// dispatch picks a worker for an admitted execution in scheduling, moves it
// to scheduled and publishes it to that worker's queue.
func (e *Executor) dispatch(ctx context.Context, c store.Claim) error {
	deadline := time.Now().Add(e.cfg.NoWorkerWait)
	var w string
	for {
		var err error
		w, err = e.workers.pick(ctx, c.Runtime)
		if err != nil {
			return err
		}
		if w != "" || !time.Now().Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(250*time.Millisecond, time.Until(deadline))):
		}
		e.workers.invalidate()
	}
	if w == "" {
		reason := "no worker available for runtime " + c.Runtime
		fin, err := e.svc.settle(ctx, c.ID, []string{store.StatusScheduling}, nil, store.Outcome{
			Status: store.StatusFailed, Reason: reason, Error: &reason,
		})
		if fin {
			e.log.Warn("execution failed: no worker", "execution", c.ID, "runtime", c.Runtime)
		}
		return err
	}
	attempt, ok, err := e.store.MarkScheduled(ctx, c.ID, w)
	if err != nil || !ok {
		return err
	}
	e.workers.noteAssigned(w)
	err = messages.PublishDispatch(ctx, e.pub, messages.ExecutionDispatch{ExecutionID: c.ID, WorkerID: w, Attempt: attempt})
	if err == nil {
		return nil
	}
	return e.undispatch(ctx, c.ID, w, err)
}

// undispatch puts an execution whose dispatch could not be delivered back
// to requested and asks again, so another worker gets it.
func (e *Executor) undispatch(ctx context.Context, id int64, worker string, cause error) error {
	e.log.Warn("dispatch failed; execution goes back to requested", "execution", id, "worker", worker, "err", cause)
	if errors.Is(cause, broker.ErrUnroutable) {
		e.workers.forget(worker)
	}
	back, err := e.store.ReturnToRequested(ctx, id, worker, "dispatch to worker "+worker+" failed: "+cause.Error())
	if err != nil || !back {
		return err
	}
	time.AfterFunc(100*time.Millisecond, func() {
		if err := messages.PublishRequested(context.Background(), e.pub, id); err != nil {
			e.log.Warn("re-request after failed dispatch; the re-driver will retry", "execution", id, "err", err)
		}
	})
	return nil
}

// handleCompleted reacts to a final status. Slots were already released in
// the transaction that set the status; this is where retries (retry.go) and
// workflow follow-ups hook in.
func (e *Executor) handleCompleted(ctx context.Context, d broker.Delivery) error {
	if d.Type != "" && d.Type != messages.TypeExecutionCompleted {
		return broker.Permanent(fmt.Errorf("unexpected message type %q on %s", d.Type, broker.QueueExecutionCompleted))
	}
	m, err := messages.Decode[messages.ExecutionCompleted](d)
	if err != nil {
		return err
	}
	if m.ExecutionID <= 0 {
		return broker.Permanent(errors.New("execution.completed without execution_id"))
	}
	if m.Status == store.StatusSucceeded || m.Status == store.StatusCancelled {
		return nil // never retried: spare the database a read per execution
	}
	return e.decideRetry(ctx, m.ExecutionID)
}
