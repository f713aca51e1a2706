package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

const registerWorkerSQL = `
INSERT INTO workers (id, host, runtimes, capacity, running, status, heartbeat_at, started_at, stopped_at, version)
VALUES ($1, $2, $3, $4, 0, 'active', now(), now(), NULL, $5)
ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, runtimes = EXCLUDED.runtimes, capacity = EXCLUDED.capacity,
    running = 0, status = 'active', heartbeat_at = now(), started_at = now(), stopped_at = NULL, version = EXCLUDED.version`

// RegisterWorker records a worker as active.
func (s *Store) RegisterWorker(ctx context.Context, w Worker) error {
	_, err := s.pool.Exec(ctx, registerWorkerSQL, w.ID, w.Host, w.Runtimes, w.Capacity, w.Version)
	return mapErr(err)
}

// Heartbeat refreshes a worker's heartbeat and load, and returns its status
// (an operator may have drained or cordoned it). ErrNotFound if unknown.
func (s *Store) Heartbeat(ctx context.Context, id string, running int) (string, error) {
	var status string
	err := s.pool.QueryRow(ctx, `UPDATE workers SET heartbeat_at = now(), running = $2 WHERE id = $1 RETURNING status`, id, running).Scan(&status)
	return status, mapErr(err)
}

// SetWorkerStatus changes a worker's status (drain, cordon, uncordon, stop).
func (s *Store) SetWorkerStatus(ctx context.Context, id, status string) (Worker, error) {
	q := `UPDATE workers SET status = $2, stopped_at = CASE WHEN $2 = 'inactive' THEN now() ELSE NULL END
	       WHERE id = $1 RETURNING ` + workerColumns
	return scanWorker(s.pool.QueryRow(ctx, q, id, status))
}

const workerColumns = `id, host, runtimes, capacity, running, status, heartbeat_at, started_at, stopped_at, version`

func scanWorker(row pgx.Row) (Worker, error) {
	var w Worker
	err := row.Scan(&w.ID, &w.Host, &w.Runtimes, &w.Capacity, &w.Running, &w.Status, &w.HeartbeatAt, &w.StartedAt, &w.StoppedAt, &w.Version)
	return w, mapErr(err)
}

// ListWorkers returns every worker, newest first.
func (s *Store) ListWorkers(ctx context.Context) ([]Worker, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+workerColumns+` FROM workers ORDER BY started_at DESC, id`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Worker, error) { return scanWorker(r) })
	return out, mapErr(err)
}

// EligibleWorkers returns active workers whose heartbeat is younger than
// maxAge, with the number of executions currently assigned to each.
func (s *Store) EligibleWorkers(ctx context.Context, maxAge time.Duration) ([]Worker, error) {
	q := `SELECT ` + workerColumns + ` FROM workers WHERE status = 'active' AND heartbeat_at > now() - make_interval(secs => $1)`
	rows, err := s.pool.Query(ctx, q, maxAge.Seconds())
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Worker, error) { return scanWorker(r) })
	return out, mapErr(err)
}

// StaleWorkers marks active/draining/cordoned workers whose heartbeat is
// older than maxAge inactive, and returns their ids. Safe on every replica:
// the UPDATE decides once.
func (s *Store) StaleWorkers(ctx context.Context, maxAge time.Duration) ([]string, error) {
	rows, err := s.pool.Query(ctx, `UPDATE workers SET status = 'inactive', stopped_at = now()
	   WHERE status <> 'inactive' AND heartbeat_at < now() - make_interval(secs => $1) RETURNING id`, maxAge.Seconds())
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, mapErr(err)
}
