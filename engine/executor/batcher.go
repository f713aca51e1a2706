package executor

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/attune-io/attune/engine/store"
)

// maxBatch bounds how many requests share one transaction.
const maxBatch = 256

// requestBatcher records concurrent requests in one transaction each round:
// while one batch commits, the next gathers, so many clients cost one commit
// and one pass over each queue's lock instead of one each. A lone request
// is a batch of one, so it waits for nobody.
type requestBatcher struct {
	svc  *Service
	in   chan *pendingRequest
	once sync.Once
}

type pendingRequest struct {
	req  store.Request
	id   int64
	err  error
	done chan struct{}
}

func newRequestBatcher(svc *Service) *requestBatcher {
	return &requestBatcher{svc: svc, in: make(chan *pendingRequest)}
}

// submit records one request and returns its execution id once committed.
func (b *requestBatcher) submit(ctx context.Context, req store.Request) (int64, error) {
	b.once.Do(func() { go b.loop() })
	p := &pendingRequest{req: req, done: make(chan struct{})}
	select {
	case b.in <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	select {
	case <-p.done:
		return p.id, p.err
	case <-ctx.Done():
		// The request may still commit; like any request whose answer is
		// lost, the client cannot tell.
		return 0, ctx.Err()
	}
}

func (b *requestBatcher) loop() {
	batch := make([]*pendingRequest, 0, maxBatch)
	for p := range b.in {
		batch = append(batch[:0], p)
	gather:
		for len(batch) < maxBatch {
			select {
			case p := <-b.in:
				batch = append(batch, p)
			default:
				break gather
			}
		}
		b.record(batch)
	}
}

// record commits one batch. Queues are visited in (action, group) order so
// concurrent batches lock them in the same order; within a queue the stable
// sort keeps arrival order, which is the FIFO order.
func (b *requestBatcher) record(batch []*pendingRequest) {
	ctx := context.Background()
	slices.SortStableFunc(batch, func(x, y *pendingRequest) int {
		return cmp.Or(cmp.Compare(x.req.ActionRef, y.req.ActionRef), cmp.Compare(x.req.GroupKey, y.req.GroupKey))
	})
	reqs := make([]store.Request, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	results, adm, err := b.svc.store.RequestExecutions(ctx, reqs)
	if err != nil {
		// One bad request (e.g. its action was just deleted) must not fail
		// the others: record them one by one.
		for _, p := range batch {
			var a store.Admission
			p.id, a, p.err = b.svc.store.RequestExecution(ctx, p.req)
			b.svc.Wake(ctx, a)
			close(p.done)
		}
		return
	}
	for i, p := range batch {
		p.id, p.err = results[i].ID, results[i].Err
		close(p.done)
	}
	b.svc.Wake(ctx, adm)
}
