package web

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// overview serves /: in-flight counts (exact, from the partial index),
// finished counts (cached), throughput, workers, dead letters and the
// busiest queues.
func (u *uiServer) overview(w http.ResponseWriter, r *http.Request) {
	ctx, now := r.Context(), u.now()
	p := ui.OverviewPage{Layout: u.layout(w, r, ui.NavOverview, "Overview"), Now: now}

	if u.dash != nil {
		unfinished, err := u.dash.CountUnfinished(ctx)
		if err != nil {
			u.failPage(w, r, err)
			return
		}
		for _, s := range store.AllStatuses {
			if !store.IsFinal(s) {
				p.InFlight = append(p.InFlight, ui.StatusCount{Status: s, N: unfinished[s]})
			}
		}
		if counts, at, ok := u.finished.get(ctx, u.dash.CountByStatus, u.log); ok {
			for _, s := range store.AllStatuses {
				if store.IsFinal(s) {
					p.Finished = append(p.Finished, ui.StatusCount{Status: s, N: counts[s]})
				}
			}
			p.FinishedAt = at
		}
		if m, err := u.dash.ChangeMarks(ctx); err == nil {
			u.hub.observe(m, time.Now())
			depth := m.DeadLetterDepth
			p.DLQDepth = &depth
		}
	}
	p.Throughput = u.hub.throughput(time.Now())

	workers, err := u.reader.ListWorkers(ctx)
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	for _, wk := range workers {
		if workerUp(wk, now) {
			p.WorkersUp++
		} else {
			p.WorkersDown++
		}
	}

	qs, err := u.reader.QueueStats(ctx, "")
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	sort.SliceStable(qs, func(i, j int) bool {
		if qs[i].QueueLength != qs[j].QueueLength {
			return qs[i].QueueLength > qs[j].QueueLength
		}
		if qs[i].ActiveCount != qs[j].ActiveCount {
			return qs[i].ActiveCount > qs[j].ActiveCount
		}
		return qs[i].TotalEnqueued > qs[j].TotalEnqueued
	})
	for _, q := range qs[:min(len(qs), 5)] {
		p.Busiest = append(p.Busiest, queueRow(q))
	}
	u.render(w, r, http.StatusOK, ui.OverviewView(p))
}

// workerUp reports whether a worker is serving: not stopped, heartbeat
// fresh.
func workerUp(wk store.Worker, now time.Time) bool {
	return wk.Status != store.WorkerInactive && now.Sub(wk.HeartbeatAt) <= workerStaleAfter
}

// queueRow converts queue telemetry to its view.
func queueRow(q store.QueueStats) ui.QueueRow {
	return ui.QueueRow{ActionRef: q.ActionRef, GroupKey: q.GroupKey, Length: q.QueueLength, Active: q.ActiveCount,
		Limit: q.Limit, OldestAt: q.OldestEnqueuedAt, Enqueued: q.TotalEnqueued, Completed: q.TotalCompleted, Paused: q.Paused}
}

// countCache keeps the finished-status counts, which scan the whole
// executions table, for ttl. When they are stale one query refreshes them;
// a page view waits for it at most staleWait and otherwise shows the
// previous counts (with their age), so no page view waits long on a full
// count except the very first.
type countCache struct {
	ttl time.Duration

	mu         sync.Mutex
	counts     map[string]int64
	at         time.Time
	refreshing chan struct{} // closed when the running refresh ends; nil when none runs
}

// staleWait is how long a page view waits for a refresh of stale counts.
const staleWait = 300 * time.Millisecond

// get returns the counts and when they were taken, refreshing them when
// stale.
func (c *countCache) get(ctx context.Context, count func(context.Context) (map[string]int64, error), log *slog.Logger) (map[string]int64, time.Time, bool) {
	c.mu.Lock()
	fresh := c.counts != nil && time.Since(c.at) <= c.ttl
	done := c.refreshing
	if !fresh && done == nil {
		done = make(chan struct{})
		c.refreshing = done
		go c.fill(count, log, done)
	}
	first := c.counts == nil
	c.mu.Unlock()
	if !fresh {
		wait := staleWait
		if first {
			wait = time.Minute
		}
		select {
		case <-done:
		case <-time.After(wait):
		case <-ctx.Done():
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts, c.at, c.counts != nil
}

// fill runs one count, on its own context so a closed page does not waste
// the work.
func (c *countCache) fill(count func(context.Context) (map[string]int64, error), log *slog.Logger, done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	counts, err := count(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = nil
	close(done)
	if err != nil {
		log.Warn("dashboard: counting executions by status", "err", err)
		return
	}
	c.counts, c.at = counts, time.Now()
}
