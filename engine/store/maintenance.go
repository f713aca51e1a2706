package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Stale is an unfinished execution whose message may have been lost.
type Stale struct {
	ID       int64
	Status   string
	WorkerID string
	Attempt  int
}

// redriveSQL picks rows nobody touched for a while and touches them, so
// replicas running the same loop do not re-drive the same row twice.
const redriveSQL = `
UPDATE executions x SET updated_at = clock_timestamp()
 WHERE x.id IN (SELECT id FROM executions
                 WHERE status IN ('requested', 'scheduling', 'scheduled')
                   AND updated_at < clock_timestamp() - make_interval(secs => $1)
                 ORDER BY id LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING x.id, x.status, coalesce(x.worker_id, ''), x.attempt`

// ClaimStale returns up to limit requested/scheduling/scheduled executions
// untouched for olderThan, marking them touched.
func (s *Store) ClaimStale(ctx context.Context, olderThan time.Duration, limit int) ([]Stale, error) {
	rows, err := s.pool.Query(ctx, redriveSQL, olderThan.Seconds(), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, scanStale)
	return out, mapErr(err)
}

// ScheduledTooLong returns executions still scheduled (never picked up)
// longer than d.
func (s *Store) ScheduledTooLong(ctx context.Context, d time.Duration, limit int) ([]Stale, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, status, coalesce(worker_id, ''), attempt FROM executions
	  WHERE status = 'scheduled' AND scheduled_at < clock_timestamp() - make_interval(secs => $1) ORDER BY id LIMIT $2`, d.Seconds(), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, scanStale)
	return out, mapErr(err)
}

// QueueTimedOut returns executions waiting for a slot longer than their
// policy's queue_timeout (or defaultTimeout).
func (s *Store) QueueTimedOut(ctx context.Context, defaultTimeout time.Duration, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.execution_id FROM admission_entries e LEFT JOIN policies p ON p.action_ref = e.action_ref
	  WHERE e.state = 'queued'
	    AND e.enqueued_at < clock_timestamp() - make_interval(secs => coalesce(p.queue_timeout_seconds, $1))
	  ORDER BY e.enqueued_at LIMIT $2`, defaultTimeout.Seconds(), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, mapErr(err)
}

// RateLimitedQueues returns queues with waiting executions whose rate window
// has reopened (a safety net for the timers set on NextWindowAt).
func (s *Store) RateLimitedQueues(ctx context.Context) ([][2]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT g.action_ref, g.group_key FROM admission_groups g JOIN policies p ON p.action_ref = g.action_ref
	  WHERE g.queue_length > 0 AND p.rate_max IS NOT NULL AND NOT p.paused
	    AND (g.window_started_at IS NULL OR g.window_started_at + make_interval(secs => p.rate_window_seconds) <= clock_timestamp())`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]string, error) {
		var k [2]string
		err := r.Scan(&k[0], &k[1])
		return k, err
	})
	return out, mapErr(err)
}

// RunningOn returns the unfinished executions assigned to a worker.
func (s *Store) RunningOn(ctx context.Context, workerID string) ([]Stale, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, status, worker_id, attempt FROM executions
	  WHERE worker_id = $1 AND status IN ('scheduled', 'running', 'canceling') ORDER BY id`, workerID)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, scanStale)
	return out, mapErr(err)
}

// scanStale reads an (id, status, worker_id, attempt) row.
func scanStale(r pgx.CollectableRow) (Stale, error) {
	var st Stale
	err := r.Scan(&st.ID, &st.Status, &st.WorkerID, &st.Attempt)
	return st, err
}
