package executor

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// workerPool caches the eligible workers (active, fresh heartbeat) for a
// second at a time so dispatch does not query the workers table per
// execution, and spreads load by capacity.
type workerPool struct {
	store  *store.Store
	maxAge time.Duration

	mu       sync.Mutex
	workers  []store.Worker
	assigned map[string]int // dispatches since the last refresh
	loadedAt time.Time
}

func newWorkerPool(st *store.Store, maxAge time.Duration) *workerPool {
	return &workerPool{store: st, maxAge: maxAge, assigned: map[string]int{}}
}

const workerCacheTTL = time.Second

// pick returns the least-loaded eligible worker supporting runtime, or "".
func (p *workerPool) pick(ctx context.Context, runtime string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.loadedAt) > workerCacheTTL {
		ws, err := p.store.EligibleWorkers(ctx, p.maxAge)
		if err != nil {
			return "", err
		}
		p.workers, p.loadedAt = ws, time.Now()
		clear(p.assigned)
	}
	best, bestLoad := "", 0.0
	for _, w := range p.workers {
		if !slices.Contains(w.Runtimes, runtime) {
			continue
		}
		load := float64(w.Running+p.assigned[w.ID]) / float64(max(w.Capacity, 1))
		if best == "" || load < bestLoad {
			best, bestLoad = w.ID, load
		}
	}
	return best, nil
}

// noteAssigned counts a dispatch against a worker until the next refresh.
func (p *workerPool) noteAssigned(id string) {
	p.mu.Lock()
	p.assigned[id]++
	p.mu.Unlock()
}

// forget drops a worker whose queue is gone until the next refresh.
func (p *workerPool) forget(id string) {
	p.mu.Lock()
	p.workers = slices.DeleteFunc(p.workers, func(w store.Worker) bool { return w.ID == id })
	p.mu.Unlock()
}

// invalidate forces a refresh on the next pick.
func (p *workerPool) invalidate() {
	p.mu.Lock()
	p.loadedAt = time.Time{}
	p.mu.Unlock()
}
