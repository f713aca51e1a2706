package store

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

const executionColumns = `x.id, x.action_ref, x.parameters, x.status, x.status_reason, x.group_key, x.result, x.error,
 x.worker_id, x.attempt, x.retry_of, x.timeout_seconds, x.stdout, x.stderr, x.stdout_truncated, x.stderr_truncated,
 x.exit_code, x.duration_ms, x.created_at, x.updated_at, x.admitted_at, x.scheduled_at, x.started_at, x.finished_at`

// listColumns leaves out stdout/stderr, which lists never show.
const listColumns = `x.id, x.action_ref, x.parameters, x.status, x.status_reason, x.group_key, x.result, x.error,
 x.worker_id, x.attempt, x.retry_of, x.timeout_seconds, NULL::text, NULL::text, x.stdout_truncated, x.stderr_truncated,
 x.exit_code, x.duration_ms, x.created_at, x.updated_at, x.admitted_at, x.scheduled_at, x.started_at, x.finished_at`

func scanExecution(row pgx.Row) (Execution, error) {
	var e Execution
	err := row.Scan(&e.ID, &e.ActionRef, &e.Parameters, &e.Status, &e.StatusReason, &e.GroupKey, &e.Result, &e.Error,
		&e.Worker, &e.Attempt, &e.RetryOf, &e.TimeoutSeconds, &e.Stdout, &e.Stderr, &e.StdoutTruncated, &e.StderrTruncated,
		&e.ExitCode, &e.DurationMs, &e.CreatedAt, &e.UpdatedAt, &e.AdmittedAt, &e.ScheduledAt, &e.StartedAt, &e.FinishedAt)
	return e, mapErr(err)
}

// queuePositionSQL returns no row when the execution is not waiting.
const queuePositionSQL = `
SELECT (SELECT count(*) FROM admission_entries q
         WHERE q.action_ref = me.action_ref AND q.group_key = me.group_key AND q.state = 'queued' AND q.seq < me.seq) + 1
  FROM admission_entries me WHERE me.execution_id = $1 AND me.state = 'queued'`

const timelineSQL = `
SELECT from_status, to_status, reason, worker_id, at FROM execution_status_history WHERE execution_id = $1 ORDER BY id`

// GetExecution returns one execution with its timeline and, while it waits
// for a slot, its 1-based position in its queue.
func (s *Store) GetExecution(ctx context.Context, id int64) (Execution, error) {
	e, err := scanExecution(s.pool.QueryRow(ctx, `SELECT `+executionColumns+` FROM executions x WHERE x.id = $1`, id))
	if err != nil {
		return e, err
	}
	if pos, ok, err := s.QueuePosition(ctx, id); err != nil {
		return e, err
	} else if ok {
		e.QueuePosition = &pos
	}
	rows, err := s.pool.Query(ctx, timelineSQL, id)
	if err != nil {
		return e, mapErr(err)
	}
	e.Timeline, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Transition, error) {
		var t Transition
		err := r.Scan(&t.From, &t.To, &t.Reason, &t.Worker, &t.At)
		return t, err
	})
	return e, mapErr(err)
}

// QueuePosition is the 1-based place of a waiting execution in its queue;
// ok is false when it is not waiting.
func (s *Store) QueuePosition(ctx context.Context, id int64) (pos int64, ok bool, err error) {
	err = s.pool.QueryRow(ctx, queuePositionSQL, id).Scan(&pos)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return pos, err == nil, mapErr(err)
}

// ExecutionFilter selects executions for ListExecutions.
type ExecutionFilter struct {
	Statuses  []string
	ActionRef string
	Before    int64 // keyset cursor: ids below this; 0 = newest
	Limit     int
}

// ListExecutions returns executions newest first with keyset pagination;
// next is the cursor for the following page, 0 when there is none.
func (s *Store) ListExecutions(ctx context.Context, f ExecutionFilter) (items []Execution, next int64, err error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if len(f.Statuses) > 0 {
		add("x.status = ANY(?)", f.Statuses)
	}
	if f.ActionRef != "" {
		add("x.action_ref = ?", f.ActionRef)
	}
	if f.Before > 0 {
		add("x.id < ?", f.Before)
	}
	q := `SELECT ` + listColumns + ` FROM executions x`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, f.Limit+1)
	q += " ORDER BY x.id DESC LIMIT $" + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanExecution(rows)
		if err != nil {
			return nil, 0, err
		}
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, mapErr(err)
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		next = items[len(items)-1].ID
	}
	return items, next, nil
}

// CountByStatus returns how many executions are in each status.
func (s *Store) CountByStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM executions GROUP BY status`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			return nil, mapErr(err)
		}
		out[st] = n
	}
	return out, mapErr(rows.Err())
}

const queueStatsSQL = `
SELECT s.action_ref, s.group_key, s.queue_length, s.active_count, s.max_concurrent, s.max_concurrent,
       s.oldest_enqueued_at, s.total_enqueued, s.total_completed, s.last_updated, coalesce(p.paused, false)
FROM queue_stats s LEFT JOIN policies p ON p.action_ref = s.action_ref`

// QueueStats lists every (action, group) queue, optionally of one action.
func (s *Store) QueueStats(ctx context.Context, actionRef string) ([]QueueStats, error) {
	q := queueStatsSQL
	var args []any
	if actionRef != "" {
		q += ` WHERE s.action_ref = $1`
		args = append(args, actionRef)
	}
	q += ` ORDER BY s.action_ref, s.group_key`
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueueStats, error) {
		var qs QueueStats
		err := r.Scan(&qs.ActionRef, &qs.GroupKey, &qs.QueueLength, &qs.ActiveCount, &qs.Limit, &qs.MaxConcurrent,
			&qs.OldestEnqueuedAt, &qs.TotalEnqueued, &qs.TotalCompleted, &qs.LastUpdated, &qs.Paused)
		return qs, err
	})
	return out, mapErr(err)
}
