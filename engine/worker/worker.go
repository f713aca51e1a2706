package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/engine/worker/runtime"
)

// Config tunes a worker engine.
type Config struct {
	ID                string        // unique worker id; default <hostname>-<random>
	Capacity          int           // concurrent executions; default 32
	HeartbeatInterval time.Duration // default 10s
	ShutdownTimeout   time.Duration // in-flight work gets this long on Stop; default 30s
	StopGrace         time.Duration // on Stop, keep consuming this long after marking draining (executors' worker cache age); default 1s
	KillGrace         time.Duration // SIGTERM→SIGKILL grace on cancel; default 5s
	QueueTTL          time.Duration // dispatch message TTL in the worker queue; default 5m
	Runtimes          []string      // default runtime.Detect()
	Version           string
	Observer          Observer // told about started and finished executions (metrics); may be nil
}

// Observer is told what the worker does, for metrics. Calls come from the
// executions' goroutines and must not block.
type Observer interface {
	// ExecutionStarted: an execution started here, waited after it was
	// requested (queueing and dispatch included).
	ExecutionStarted(actionRef string, waited time.Duration)
	// ExecutionFinished: an execution ran for ran and its outcome was
	// recorded with status.
	ExecutionFinished(actionRef, status string, ran time.Duration)
	// LateResultRejected: an outcome was dropped because the execution had
	// been settled elsewhere (e.g. this worker was declared dead).
	LateResultRejected(actionRef string)
}

type nopObserver struct{}

// ExecutionStarted does nothing.
func (nopObserver) ExecutionStarted(string, time.Duration) {}

// ExecutionFinished does nothing.
func (nopObserver) ExecutionFinished(string, string, time.Duration) {}

// LateResultRejected does nothing.
func (nopObserver) LateResultRejected(string) {}

func (c Config) withDefaults() Config {
	if c.ID == "" {
		c.ID = NewID()
	}
	if c.Observer == nil {
		c.Observer = nopObserver{}
	}
	if c.Capacity <= 0 {
		c.Capacity = 32
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = 10 * time.Second
	}
	if c.ShutdownTimeout < 0 {
		c.ShutdownTimeout = 0
	}
	if c.StopGrace <= 0 {
		c.StopGrace = time.Second
	}
	if c.KillGrace <= 0 {
		c.KillGrace = 5 * time.Second
	}
	if c.QueueTTL <= 0 {
		c.QueueTTL = 5 * time.Minute
	}
	if len(c.Runtimes) == 0 {
		c.Runtimes = runtime.Detect()
	}
	return c
}

// Worker is one worker engine.
type Worker struct {
	cfg    Config
	store  *store.Store
	conn   *broker.Conn
	pub    messages.Publisher
	log    *slog.Logger
	runner *runtime.Runner

	host string

	mu       sync.Mutex
	inflight map[int64]context.CancelCauseFunc
	status   string // as of the last registration or heartbeat

	stopping      atomic.Bool // Stop began: no re-registration, no drain completion
	stopOnce      sync.Once
	consumeCancel context.CancelFunc // stops taking new dispatches
	runCtx        context.Context    // executions run under this
	runCancel     context.CancelCauseFunc
	wg            sync.WaitGroup // the dispatch consumer
	loops         sync.WaitGroup // heartbeat and cancel consumer
	stopLoops     context.CancelFunc

	// Ready is closed once the dispatch consumer is subscribed (a test signal).
	Ready chan struct{}
}

// New creates a worker engine; Start registers and runs it.
func New(cfg Config, st *store.Store, conn *broker.Conn, pub messages.Publisher, log *slog.Logger) *Worker {
	cfg = cfg.withDefaults()
	return &Worker{cfg: cfg, store: st, conn: conn, pub: pub, log: log.With("worker", cfg.ID),
		runner: runtime.NewRunner(), inflight: map[int64]context.CancelCauseFunc{}, Ready: make(chan struct{})}
}

// ID is the worker's id.
func (w *Worker) ID() string { return w.cfg.ID }

// Start registers the worker, settles what a previous process with the
// same id left running, declares its queues and starts consuming. Only Stop
// stops it: cancelling ctx does not (a SIGTERM must lead to a graceful
// shutdown, not to a worker that silently stops heartbeating).
func (w *Worker) Start(ctx context.Context) error {
	if err := ValidateID(w.cfg.ID); err != nil {
		return err
	}
	w.host, _ = os.Hostname()
	if err := w.conn.Declare(ctx, w.declare); err != nil {
		return err
	}
	if err := w.register(ctx); err != nil {
		return fmt.Errorf("register worker: %w", err)
	}
	if err := w.releaseLeftovers(ctx); err != nil {
		return fmt.Errorf("settle executions of the previous worker process: %w", err)
	}
	base := context.WithoutCancel(ctx)
	w.runCtx, w.runCancel = context.WithCancelCause(base)
	var consumeCtx, loopCtx context.Context
	consumeCtx, w.consumeCancel = context.WithCancel(base)
	loopCtx, w.stopLoops = context.WithCancel(base)
	var once sync.Once
	w.wg.Go(func() {
		_ = w.conn.Consume(consumeCtx, broker.ConsumeOptions{
			Queue: broker.WorkerQueue(w.cfg.ID), Prefetch: w.cfg.Capacity, Declare: w.declare,
			HandlerCtx: w.runCtx, Logger: w.log, OnReady: func() { once.Do(func() { close(w.Ready) }) },
		}, w.handleDispatch)
	})
	// Cancels keep arriving while a shutdown waits for in-flight work.
	w.loops.Go(func() {
		_ = w.conn.Consume(loopCtx, broker.ConsumeOptions{
			Queue: controlQueue(w.cfg.ID), Prefetch: 16, Declare: w.declareControl, Logger: w.log,
		}, w.handleCancel)
	})
	w.loops.Go(func() { w.heartbeatLoop(loopCtx) })
	w.log.Info("worker started", "capacity", w.cfg.Capacity, "runtimes", w.cfg.Runtimes, "status", w.Status())
	return nil
}

func (w *Worker) declare(ch *amqp.Channel) error {
	return broker.DeclareWorkerQueue(ch, w.cfg.ID, int(w.cfg.QueueTTL/time.Millisecond))
}

// controlQueue carries cancels; separate from dispatches so a full worker
// still hears them. Exclusive and auto-deleted: a cancel for a worker that
// is gone has nothing to stop.
func controlQueue(id string) string { return "worker." + id + ".control" }

func (w *Worker) declareControl(ch *amqp.Channel) error {
	if err := broker.DeclareExchanges(ch); err != nil {
		return err
	}
	if _, err := ch.QueueDeclare(controlQueue(w.cfg.ID), false, true, false, false, nil); err != nil {
		return err
	}
	return ch.QueueBind(controlQueue(w.cfg.ID), messages.CancelRoutingKey(w.cfg.ID), broker.ExchangeExecutions, false, nil)
}

// handleDispatch starts (fenced), runs and finishes one execution.
func (w *Worker) handleDispatch(ctx context.Context, d broker.Delivery) error {
	if d.Type != "" && d.Type != messages.TypeExecutionDispatch {
		return broker.Permanent(fmt.Errorf("unexpected message type %q on worker queue", d.Type))
	}
	m, err := messages.Decode[messages.ExecutionDispatch](d)
	if err != nil {
		return err
	}
	if m.WorkerID != w.cfg.ID {
		return broker.Permanent(fmt.Errorf("dispatch for worker %q arrived at %q", m.WorkerID, w.cfg.ID))
	}
	run, ok, err := w.store.StartRun(ctx, m.ExecutionID, w.cfg.ID, m.Attempt)
	if err != nil || !ok {
		return err // !ok: a duplicate or stale dispatch; nothing to do
	}
	w.cfg.Observer.ExecutionStarted(run.ActionRef, run.Waited)
	w.notify(ctx, run.ID, run.ActionRef, store.StatusRunning)
	runCtx, cancel := context.WithCancelCause(ctx)
	w.track(run.ID, cancel)
	defer w.untrack(run.ID)
	out := w.runner.Run(runCtx, runtime.Request{
		ExecutionID: run.ID, ActionRef: run.ActionRef, Runtime: run.Runtime, Entrypoint: entrypoint(run),
		WorkDir: run.PackPath, Parameters: run.Parameters, Timeout: seconds(run.TimeoutSeconds), KillGrace: w.cfg.KillGrace,
	})
	return w.finish(context.WithoutCancel(ctx), run, m.Attempt, out)
}

// entrypoint resolves a script path inside its pack.
func entrypoint(r store.Run) string {
	if r.Runtime == runtime.Builtin || filepath.IsAbs(r.Entrypoint) || r.PackPath == "" {
		return r.Entrypoint
	}
	return filepath.Join(r.PackPath, r.Entrypoint)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// finish records the outcome while the row still names this worker. A
// cancel that arrived meanwhile wins: canceling always ends as cancelled.
func (w *Worker) finish(ctx context.Context, run store.Run, attempt int, out runtime.Outcome) error {
	o := toOutcome(out)
	fence := &store.Fence{WorkerID: w.cfg.ID, Attempt: attempt}
	fin, adm, err := w.store.Finish(ctx, run.ID, []string{store.StatusRunning}, fence, o)
	if err != nil {
		return err
	}
	if !fin {
		o.Status, o.Reason = store.StatusCancelled, "cancelled by request"
		fin, adm, err = w.store.Finish(ctx, run.ID, []string{store.StatusCanceling}, fence, o)
		if err != nil {
			return err
		}
	}
	if !fin {
		// Fenced: the execution was settled elsewhere (e.g. this worker was
		// declared dead). The late result is dropped on purpose.
		w.log.Warn("late result rejected: execution no longer belongs to this worker", "execution", run.ID, "outcome", out.Status)
		w.cfg.Observer.LateResultRejected(run.ActionRef)
		return nil
	}
	w.cfg.Observer.ExecutionFinished(run.ActionRef, o.Status, out.Duration)
	w.wake(ctx, adm)
	if err := messages.PublishCompleted(ctx, w.pub, messages.ExecutionCompleted{ExecutionID: run.ID, Status: o.Status, WorkerID: w.cfg.ID, Attempt: attempt}); err != nil {
		w.log.Warn("publish execution.completed failed", "execution", run.ID, "err", err)
	}
	w.notify(ctx, run.ID, run.ActionRef, o.Status)
	return nil
}

// wake publishes execution.requested for the heads a finish promoted.
func (w *Worker) wake(ctx context.Context, adm store.Admission) {
	for _, id := range adm.Woken {
		if err := messages.PublishRequested(ctx, w.pub, id); err != nil {
			w.log.Warn("publish wake-up failed; the re-driver will retry", "execution", id, "err", err)
		}
	}
}

func toOutcome(out runtime.Outcome) store.Outcome {
	o := store.Outcome{
		Status: out.Status, Result: out.Result, Stdout: &out.Stdout, Stderr: &out.Stderr,
		StdoutTruncated: out.StdoutTruncated, StderrTruncated: out.StderrTruncated, ExitCode: out.ExitCode,
	}
	ms := float64(out.Duration) / float64(time.Millisecond)
	o.DurationMs = &ms
	if out.Error != "" {
		e := out.Error
		o.Error, o.Reason = &e, out.Error
	} else {
		o.Reason = "finished"
	}
	if len(o.Result) > 0 && !json.Valid(o.Result) {
		o.Result = nil
	}
	return o
}

func (w *Worker) notify(ctx context.Context, id int64, action, status string) {
	_ = messages.PublishChanged(ctx, w.pub, messages.ExecutionChanged{ExecutionID: id, ActionRef: action, Status: status})
}

func (w *Worker) track(id int64, cancel context.CancelCauseFunc) {
	w.mu.Lock()
	w.inflight[id] = cancel
	w.mu.Unlock()
}

func (w *Worker) untrack(id int64) {
	w.mu.Lock()
	delete(w.inflight, id)
	w.mu.Unlock()
}

// Running is the number of executions in flight.
func (w *Worker) Running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inflight)
}

// cancelLocal stops a running execution of this worker.
func (w *Worker) cancelLocal(id int64, reason string) bool {
	w.mu.Lock()
	cancel, ok := w.inflight[id]
	w.mu.Unlock()
	if ok {
		cancel(errors.New(reason))
	}
	return ok
}

func (w *Worker) handleCancel(_ context.Context, d broker.Delivery) error {
	m, err := messages.Decode[messages.ExecutionCancel](d)
	if err != nil {
		return err
	}
	w.cancelLocal(m.ExecutionID, "cancelled by request")
	return nil
}
