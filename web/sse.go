package web

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// Notifications subscribes to execution change notifications and calls fn
// for each until ctx ends; it should keep resubscribing through broker
// outages and return only when ctx is done. fn must not block.
type Notifications func(ctx context.Context, fn func(messages.ExecutionChanged)) error

// hubConfig configures the dashboard's live feed.
type hubConfig struct {
	Source Notifications                                    // broker feed; nil for none
	Marks  func(context.Context) (store.ChangeMarks, error) // change fingerprints; nil for none
	Logger *slog.Logger
	// Coalesce is the shortest gap between two events to one browser
	// (default 500 ms): a burst of any size becomes one event per gap.
	Coalesce time.Duration
	// Poll is how often the change marks are read while anyone watches
	// (default 1 s); they catch changes no notification announces.
	Poll time.Duration
	// Linger keeps the feed (and the throughput sampler) running this long
	// after the last browser left (default 15 min, the chart's window).
	Linger time.Duration
}

// hub fans change notifications out to the browsers' SSE streams. Changes
// are collected as a set of dirty sections and flushed at most once per
// Coalesce interval; each stream merges what it has not sent yet, so a slow
// browser gets fewer, bigger events instead of a backlog. The hub's loop
// runs only while someone watches (plus Linger).
type hub struct {
	cfg hubConfig

	mu        sync.Mutex
	clients   map[*sseClient]struct{}
	running   bool
	stopLoop  context.CancelFunc
	lastSeen  time.Time
	dirty     map[string]bool
	lastFlush time.Time
	timer     *time.Timer
	marks     *store.ChangeMarks
	tp        throughputRing
	servers   map[*http.Server]chan struct{}

	stats hubStats
}

// hubStats count what the hub did (tests and measurements read them).
type hubStats struct {
	Notifications atomic.Int64 // broker notifications received
	Polls         atomic.Int64 // change-mark reads
	Flushes       atomic.Int64 // coalesced flushes to all streams
	Events        atomic.Int64 // events written to browsers
}

// sseClient is one browser's stream: the sections changed since its last
// event, and a wake-up signal.
type sseClient struct {
	mu      sync.Mutex
	pending map[string]bool
	signal  chan struct{}
}

func newHub(cfg hubConfig) *hub {
	if cfg.Coalesce <= 0 {
		cfg.Coalesce = 500 * time.Millisecond
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Linger <= 0 {
		cfg.Linger = 15 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &hub{cfg: cfg, clients: map[*sseClient]struct{}{}, dirty: map[string]bool{},
		servers: map[*http.Server]chan struct{}{}}
}

// subscribe adds a stream and starts the hub's loop if needed.
func (h *hub) subscribe() (*sseClient, func()) {
	c := &sseClient{pending: map[string]bool{}, signal: make(chan struct{}, 1)}
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.lastSeen = time.Now()
	h.ensureRunningLocked()
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.clients, c)
		h.lastSeen = time.Now()
		h.mu.Unlock()
	}
}

// ensureRunningLocked starts the loop; h.mu is held.
func (h *hub) ensureRunningLocked() {
	if h.running {
		return
	}
	h.running = true
	ctx, cancel := context.WithCancel(context.Background())
	h.stopLoop = cancel
	go h.loop(ctx, cancel)
}

// loop feeds the hub from the broker and the change marks until nobody has
// watched for Linger.
func (h *hub) loop(ctx context.Context, cancel context.CancelFunc) {
	defer cancel()
	if h.cfg.Source != nil {
		go func() {
			if err := h.cfg.Source(ctx, h.onNotification); err != nil && ctx.Err() == nil {
				h.cfg.Logger.Warn("dashboard notifications stopped; the dashboard falls back to polling", "err", err)
			}
		}()
	}
	tick := time.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	for {
		h.poll(ctx)
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.running = false
			h.mu.Unlock()
			return
		case <-tick.C:
		}
		h.mu.Lock()
		idle := len(h.clients) == 0 && time.Since(h.lastSeen) > h.cfg.Linger
		if idle {
			h.running = false
		}
		h.mu.Unlock()
		if idle {
			return
		}
	}
}

// onNotification marks what an execution change makes stale.
func (h *hub) onNotification(messages.ExecutionChanged) {
	h.stats.Notifications.Add(1)
	h.notify(ui.SectionExecutions, ui.SectionQueues)
}

// poll reads the change marks, notifies the sections whose marks moved and
// records a throughput sample.
func (h *hub) poll(ctx context.Context) {
	if h.cfg.Marks == nil {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	m, err := h.cfg.Marks(qctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			h.cfg.Logger.Debug("dashboard change marks", "err", err)
		}
		return
	}
	h.stats.Polls.Add(1)
	h.observe(m, time.Now())
}

// observe compares marks with the previous reading and records a sample.
func (h *hub) observe(m store.ChangeMarks, now time.Time) {
	h.mu.Lock()
	prev := h.marks
	h.marks = &m
	h.tp.add(throughputSample{At: now, Enqueued: m.Enqueued, Completed: m.Completed})
	h.mu.Unlock()
	if prev == nil {
		return
	}
	var changed []string
	if m.LastTransition != prev.LastTransition || m.LastExecution != prev.LastExecution {
		changed = append(changed, ui.SectionExecutions)
	}
	if !m.QueuesUpdated.Equal(prev.QueuesUpdated) || m.Enqueued != prev.Enqueued || m.Completed != prev.Completed {
		changed = append(changed, ui.SectionQueues)
	}
	if m.Workers != prev.Workers || !m.LastHeartbeat.Equal(prev.LastHeartbeat) {
		changed = append(changed, ui.SectionWorkers)
	}
	if m.DeadLetters != prev.DeadLetters {
		changed = append(changed, ui.SectionDeadLetters)
	}
	if len(changed) > 0 {
		h.notify(changed...)
	}
}

// notify marks sections dirty and schedules a flush no sooner than
// Coalesce after the previous one.
func (h *hub) notify(sections ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range sections {
		h.dirty[s] = true
	}
	if h.timer != nil {
		return
	}
	wait := max(0, time.Until(h.lastFlush.Add(h.cfg.Coalesce)))
	h.timer = time.AfterFunc(wait, h.flush)
}

// flush hands the dirty sections to every stream.
func (h *hub) flush() {
	h.mu.Lock()
	dirty := h.dirty
	h.dirty = map[string]bool{}
	h.timer = nil
	h.lastFlush = time.Now()
	clients := make([]*sseClient, 0, len(h.clients))
	for c := range h.clients {
		clients = append(clients, c)
	}
	h.mu.Unlock()
	if len(dirty) == 0 {
		return
	}
	h.stats.Flushes.Add(1)
	for _, c := range clients {
		c.mu.Lock()
		for s := range dirty {
			c.pending[s] = true
		}
		c.mu.Unlock()
		select {
		case c.signal <- struct{}{}:
		default: // already signalled; it will see the merged set
		}
	}
}

// take returns and clears the stream's pending sections, sorted.
func (c *sseClient) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pending))
	for s := range c.pending {
		out = append(out, s)
	}
	clear(c.pending)
	sort.Strings(out)
	return out
}

// latest returns the newest change marks the loop read, if any.
func (h *hub) latest() (store.ChangeMarks, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.marks == nil {
		return store.ChangeMarks{}, false
	}
	return *h.marks, true
}

// throughput summarises the samples for the overview.
func (h *hub) throughput(now time.Time) ui.Throughput {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tp.summary(now)
}

// closing returns a channel closed when srv shuts down, registering the
// hook once per server: http.Server.Shutdown waits for active connections,
// and an SSE stream never goes idle by itself. Shutdown also stops the
// hub's loop (its broker consumer and polling) at once.
func (h *hub) closing(srv *http.Server) <-chan struct{} {
	if srv == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ch, ok := h.servers[srv]
	if !ok {
		ch = make(chan struct{})
		h.servers[srv] = ch
		srv.RegisterOnShutdown(func() {
			close(ch)
			h.mu.Lock()
			if h.stopLoop != nil {
				h.stopLoop()
			}
			h.mu.Unlock()
		})
	}
	return ch
}
