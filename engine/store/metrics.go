package store

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The queries behind /metrics. Each must stay cheap on a table of millions
// of executions, because a scraper runs them every few seconds (the web
// layer also caches the snapshot): in-flight executions are counted through
// the executions_unfinished partial index (its size is the number of
// executions in flight), the rest reads the small admission, worker and
// dead-letter tables. Finished executions are not counted in the database
// at all: see FinishedTotals.

// metricsUnfinishedSQL counts executions per in-flight status; the IN list
// matches the predicate of the executions_unfinished partial index.
const metricsUnfinishedSQL = `
SELECT status, count(*) FROM executions
 WHERE status IN ('requested', 'scheduling', 'queued', 'scheduled', 'running', 'canceling')
 GROUP BY status`

// metricsQueuesSQL sums every action's queues (one row per group key).
const metricsQueuesSQL = `
SELECT action_ref, sum(queue_length)::bigint, sum(active_count)::bigint FROM admission_groups GROUP BY action_ref`

// metricsDeadLettersSQL counts dead letters waiting for an operator (not
// replayed; discarded ones are deleted).
const metricsDeadLettersSQL = `
SELECT reason, count(*) FROM dead_letters WHERE replayed_at IS NULL GROUP BY reason`

// metricsWorkersSQL lists workers with their heartbeat age measured on the
// database's clock, leaving out workers gone for more than a day so that
// old ids do not linger in the metrics forever.
const metricsWorkersSQL = `
SELECT id, status, running, capacity, extract(epoch FROM now() - heartbeat_at)::float8 FROM workers
 WHERE status <> 'inactive' OR heartbeat_at > now() - interval '1 day'`

// UnfinishedStatuses are the statuses of executions in flight, as counted by
// MetricsSnapshot.
var UnfinishedStatuses = []string{StatusRequested, StatusScheduling, StatusQueued, StatusScheduled, StatusRunning, StatusCanceling}

// WorkerStatuses lists every worker status.
var WorkerStatuses = []string{WorkerActive, WorkerCordoned, WorkerDraining, WorkerDrained, WorkerInactive}

// QueueMetric is the sum of one action's FIFO queues.
type QueueMetric struct {
	ActionRef string
	Length    int64 // executions waiting for a slot
	Active    int64 // executions holding a slot
}

// WorkerMetric is one worker as the metrics show it.
type WorkerMetric struct {
	ID           string
	Status       string
	Running      int
	Capacity     int
	HeartbeatAge time.Duration
}

// MetricsSnapshot is what /metrics reads from the database in one round
// trip.
type MetricsSnapshot struct {
	Unfinished  map[string]int64 // in-flight executions by status (every UnfinishedStatuses key present)
	Queues      []QueueMetric
	DeadLetters map[string]int64 // dead letters not replayed, by reason
	Workers     []WorkerMetric
}

// MetricsSnapshot reads the gauges of /metrics in one batch.
func (s *Store) MetricsSnapshot(ctx context.Context) (MetricsSnapshot, error) {
	snap := MetricsSnapshot{Unfinished: map[string]int64{}, DeadLetters: map[string]int64{}}
	for _, st := range UnfinishedStatuses {
		snap.Unfinished[st] = 0
	}
	b := &pgx.Batch{}
	b.Queue(metricsUnfinishedSQL).Query(func(rows pgx.Rows) error {
		return scanCounts(rows, snap.Unfinished)
	})
	b.Queue(metricsQueuesSQL).Query(func(rows pgx.Rows) error {
		var err error
		snap.Queues, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueMetric, error) {
			var q QueueMetric
			err := r.Scan(&q.ActionRef, &q.Length, &q.Active)
			return q, err
		})
		return err
	})
	b.Queue(metricsDeadLettersSQL).Query(func(rows pgx.Rows) error {
		return scanCounts(rows, snap.DeadLetters)
	})
	b.Queue(metricsWorkersSQL).Query(func(rows pgx.Rows) error {
		var err error
		snap.Workers, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (WorkerMetric, error) {
			var w WorkerMetric
			var age float64
			err := r.Scan(&w.ID, &w.Status, &w.Running, &w.Capacity, &age)
			w.HeartbeatAge = time.Duration(max(age, 0) * float64(time.Second))
			return w, err
		})
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return MetricsSnapshot{}, mapErr(err)
	}
	return snap, nil
}

func scanCounts(rows pgx.Rows, into map[string]int64) error {
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return err
		}
		into[k] = n
	}
	return rows.Err()
}

// finished counts the final transitions this process made, by status.
var finished = struct {
	sync.Mutex
	n map[string]uint64
}{n: map[string]uint64{}}

// countFinished is called by Finish for every transition it won.
func countFinished(status string) {
	finished.Lock()
	finished.n[status]++
	finished.Unlock()
}

// FinishedTotals returns how many executions this process moved to each
// final status since it started (every final status present). These are
// per-process counters in the Prometheus sense: summed over the appliances
// of a cluster they count every finished execution, without a query over
// millions of finished rows.
func FinishedTotals() map[string]uint64 {
	finished.Lock()
	defer finished.Unlock()
	out := make(map[string]uint64, len(finished.n)+5)
	for _, st := range AllStatuses {
		if IsFinal(st) {
			out[st] = finished.n[st]
		}
	}
	return out
}
