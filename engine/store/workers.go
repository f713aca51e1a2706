package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WorkerDrained is the status of a worker whose operator drain finished:
// it runs nothing and takes no work until uncordoned. Like WorkerCordoned
// it is the operator's decision and survives restarts of the worker.
const WorkerDrained = "drained"

// Worker statuses and who sets them (engine/worker/doc.go has the full
// story):
//   - active: eligible for dispatch (registration, uncordon);
//   - cordoned: operator; no new work, keeps running what it was given;
//   - draining: operator drain (stopped_at NULL) or the worker's own
//     graceful shutdown (stopped_at set); no new work, finishing in-flight;
//   - drained: an operator drain finished;
//   - inactive: stopped gracefully or declared dead (stale heartbeat).
//
// Registration and heartbeats never undo an operator's cordon or drain.

const workerColumns = `id, host, runtimes, capacity, running, status, heartbeat_at, started_at, stopped_at, version`

// registerWorkerSQL records a (re)started worker. An operator's cordon or
// drain outlives the process: a restarted worker stays cordoned/drained,
// and one restarted in the middle of an operator drain has nothing in
// flight any more, so its drain is complete.
const registerWorkerSQL = `
INSERT INTO workers AS w (id, host, runtimes, capacity, running, status, heartbeat_at, started_at, stopped_at, version)
VALUES ($1, $2, $3, $4, 0, 'active', now(), now(), NULL, $5)
ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, runtimes = EXCLUDED.runtimes, capacity = EXCLUDED.capacity,
    running = 0,
    status = CASE WHEN w.status IN ('cordoned', 'drained') THEN w.status
                  WHEN w.status = 'draining' AND w.stopped_at IS NULL THEN 'drained'
                  ELSE 'active' END,
    heartbeat_at = now(), started_at = now(), stopped_at = NULL, version = EXCLUDED.version
RETURNING w.status`

// RegisterWorker records a worker as started (see RegisterWorkerStatus).
func (s *Store) RegisterWorker(ctx context.Context, w Worker) error {
	_, err := s.RegisterWorkerStatus(ctx, w)
	return err
}

// RegisterWorkerStatus records a worker as started and returns the status
// it has now: active, or cordoned/drained when an operator said so before.
func (s *Store) RegisterWorkerStatus(ctx context.Context, w Worker) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, registerWorkerSQL, w.ID, w.Host, w.Runtimes, w.Capacity, w.Version).Scan(&status)
	return status, mapErr(err)
}

const heartbeatSQL = `UPDATE workers SET heartbeat_at = now(), running = $2 WHERE id = $1 RETURNING status`

// Heartbeat refreshes a worker's heartbeat and load, and returns its status
// (an operator may have drained or cordoned it; the reaper may have
// declared it dead). It never changes the status. ErrNotFound if unknown.
func (s *Store) Heartbeat(ctx context.Context, id string, running int) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, heartbeatSQL, id, running).Scan(&status)
	return status, mapErr(err)
}

// operatorStatusSQL applies an operator's drain ($2 = 'draining'), cordon
// ('cordoned') or uncordon ('active'):
//   - drain: active, cordoned and a worker shutting down become an operator
//     drain (stopped_at NULL); drained stays; inactive becomes drained at
//     once (nothing runs there), so the worker stays out when it returns;
//   - cordon: always cordoned;
//   - uncordon: cordoned, drained and an operator drain become active; an
//     inactive worker, or one shutting down, keeps its status.
const operatorStatusSQL = `
UPDATE workers SET
    status = CASE $2::text
        WHEN 'draining' THEN CASE WHEN status = 'drained' THEN 'drained'
                                  WHEN status = 'inactive' THEN 'drained'
                                  ELSE 'draining' END
        WHEN 'cordoned' THEN 'cordoned'
        ELSE CASE WHEN status IN ('cordoned', 'drained') OR (status = 'draining' AND stopped_at IS NULL) THEN 'active'
                  ELSE status END
    END,
    stopped_at = CASE WHEN $2::text = 'draining' AND status IN ('active', 'cordoned', 'draining') THEN NULL
                      ELSE stopped_at END
 WHERE id = $1
RETURNING ` + workerColumns

// SetWorkerStatus applies an operator's decision: status WorkerDraining
// drains the worker (no new work; it finishes what it has, then shows
// drained), WorkerCordoned cordons it (no new work; it keeps running what
// it has), WorkerActive uncordons it. Repeating a decision is harmless.
// ErrNotFound for an unknown worker.
func (s *Store) SetWorkerStatus(ctx context.Context, id, status string) (Worker, error) {
	switch status {
	case WorkerDraining, WorkerCordoned, WorkerActive:
	default:
		return Worker{}, fmt.Errorf("worker status %q cannot be set by an operator (want draining, cordoned or active)", status)
	}
	return scanWorker(s.pool.QueryRow(ctx, operatorStatusSQL, id, status))
}

// workerStoppingSQL marks a worker that begins a graceful shutdown:
// draining with stopped_at set (so it is not mistaken for an operator
// drain). An operator's cordon, drain or drained status is kept.
const workerStoppingSQL = `
UPDATE workers SET
    status = CASE WHEN status IN ('cordoned', 'drained') OR (status = 'draining' AND stopped_at IS NULL) THEN status
                  ELSE 'draining' END,
    stopped_at = CASE WHEN status = 'draining' AND stopped_at IS NULL THEN NULL ELSE now() END
 WHERE id = $1`

// MarkWorkerStopping records that a worker begins its graceful shutdown; the
// executor stops dispatching to it.
func (s *Store) MarkWorkerStopping(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, workerStoppingSQL, id)
	return mapErr(err)
}

// workerStoppedSQL marks a worker whose process stopped: inactive, unless
// an operator cordoned or drained it (that decision outlives the process).
const workerStoppedSQL = `
UPDATE workers SET
    status = CASE WHEN status IN ('cordoned', 'drained') THEN status
                  WHEN status = 'draining' AND stopped_at IS NULL THEN 'drained'
                  ELSE 'inactive' END,
    stopped_at = now(), running = 0
 WHERE id = $1
RETURNING status`

// MarkWorkerStopped records that a worker's process stopped and returns its
// final status.
func (s *Store) MarkWorkerStopped(ctx context.Context, id string) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, workerStoppedSQL, id).Scan(&status)
	return status, mapErr(err)
}

// workerDrainedSQL ends an operator drain once nothing is assigned to the
// worker any more.
const workerDrainedSQL = `
UPDATE workers SET status = 'drained'
 WHERE id = $1 AND status = 'draining' AND stopped_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM executions x
                    WHERE x.worker_id = $1 AND x.status IN ('scheduled', 'running', 'canceling'))`

// MarkWorkerDrained moves a worker from an operator drain to drained when
// no execution is assigned to it any more; false when it is not draining
// or still has work.
func (s *Store) MarkWorkerDrained(ctx context.Context, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, workerDrainedSQL, id)
	return tag.RowsAffected() == 1, mapErr(err)
}

func scanWorker(row pgx.Row) (Worker, error) {
	var w Worker
	err := row.Scan(&w.ID, &w.Host, &w.Runtimes, &w.Capacity, &w.Running, &w.Status, &w.HeartbeatAt, &w.StartedAt, &w.StoppedAt, &w.Version)
	return w, mapErr(err)
}

const listWorkersSQL = `SELECT ` + workerColumns + ` FROM workers ORDER BY started_at DESC, id`

// ListWorkers returns every worker, newest first.
func (s *Store) ListWorkers(ctx context.Context) ([]Worker, error) {
	return s.queryWorkers(ctx, listWorkersSQL)
}

const getWorkerSQL = `SELECT ` + workerColumns + ` FROM workers WHERE id = $1`

// GetWorker returns one worker; ErrNotFound if unknown.
func (s *Store) GetWorker(ctx context.Context, id string) (Worker, error) {
	return scanWorker(s.pool.QueryRow(ctx, getWorkerSQL, id))
}

const eligibleWorkersSQL = `SELECT ` + workerColumns + ` FROM workers
 WHERE status = 'active' AND heartbeat_at > now() - make_interval(secs => $1)`

// EligibleWorkers returns active workers whose heartbeat is younger than
// maxAge, with the number of executions currently running on each.
func (s *Store) EligibleWorkers(ctx context.Context, maxAge time.Duration) ([]Worker, error) {
	return s.queryWorkers(ctx, eligibleWorkersSQL, maxAge.Seconds())
}

func (s *Store) queryWorkers(ctx context.Context, q string, args ...any) ([]Worker, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Worker, error) { return scanWorker(r) })
	return out, mapErr(err)
}

// staleWorkersSQL is the dead-worker reaper's one statement. It marks
// active and draining workers whose heartbeat is older than $1 seconds
// inactive (an operator drain counts as finished: drained), keeps an
// operator's cordoned/drained status, and returns those workers plus every
// stale worker that still has unfinished executions assigned, whatever its
// status (e.g. a cordoned worker that died, or a stopped one that was sent
// a dispatch just before it stopped).
const staleWorkersSQL = `
WITH marked AS (
    UPDATE workers SET status = CASE WHEN status = 'draining' AND stopped_at IS NULL THEN 'drained' ELSE 'inactive' END,
                       stopped_at = coalesce(stopped_at, now()), running = 0
     WHERE status IN ('active', 'draining') AND heartbeat_at < now() - make_interval(secs => $1)
    RETURNING id
), orphaned AS (
    SELECT DISTINCT x.worker_id AS id FROM executions x JOIN workers w ON w.id = x.worker_id
     WHERE x.status IN ('scheduled', 'running', 'canceling') AND w.heartbeat_at < now() - make_interval(secs => $1)
)
SELECT id FROM marked UNION SELECT id FROM orphaned`

// StaleWorkers marks workers whose heartbeat is older than maxAge as dead
// and returns the ids of stale workers whose executions must be released.
// Safe on every replica: the UPDATE decides once, and releasing is made of
// compare-and-swaps.
func (s *Store) StaleWorkers(ctx context.Context, maxAge time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, staleWorkersSQL, maxAge.Seconds())
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
