package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Retry states kept on a finished attempt (migration 00003).
const (
	RetryPending = "pending" // a retry is due at retry_at
	RetryDone    = "done"    // the retry (or a replay) was requested
	RetryNone    = "none"    // the policy does not retry this outcome
)

// Finished is a finished attempt as the retry logic sees it.
type Finished struct {
	ID             int64
	ActionRef      string
	Parameters     json.RawMessage
	TimeoutSeconds *float64
	Status         string
	Reason         string
	Started        bool // it reached a worker (started_at is set)
	Attempt        int
	RetryState     string          // "" while undecided
	HasSuccessor   bool            // a retry or replay of it exists
	Retry          json.RawMessage // the action's retry policy; nil when the action is gone
}

const finishedSQL = `
SELECT x.id, x.action_ref, x.parameters, x.timeout_seconds, x.status, coalesce(x.status_reason, ''), x.started_at IS NOT NULL,
       x.attempt, coalesce(x.retry_state, ''), EXISTS (SELECT 1 FROM executions r WHERE r.retry_of = x.id), a.retry
  FROM executions x LEFT JOIN actions a ON a.ref = x.action_ref
 WHERE x.id = $1`

// GetFinished returns what the retry decision needs about one execution.
func (s *Store) GetFinished(ctx context.Context, id int64) (Finished, error) {
	var f Finished
	err := s.pool.QueryRow(ctx, finishedSQL, id).Scan(&f.ID, &f.ActionRef, &f.Parameters, &f.TimeoutSeconds, &f.Status,
		&f.Reason, &f.Started, &f.Attempt, &f.RetryState, &f.HasSuccessor, &f.Retry)
	return f, mapErr(err)
}

const planRetrySQL = `
UPDATE executions x SET retry_state = $2,
       retry_at = CASE WHEN $2 = 'pending' THEN clock_timestamp() + make_interval(secs => $3) END
 WHERE x.id = $1 AND x.retry_state IS NULL AND x.status IN ('succeeded', 'failed', 'timeout', 'cancelled', 'abandoned')
   AND NOT EXISTS (SELECT 1 FROM executions r WHERE r.retry_of = x.id)`

// DecideRetry records the retry decision for a finished attempt, once: the
// first caller wins (compare-and-swap on an undecided retry_state), so
// duplicate completions and several executors plan one retry. state is
// RetryPending (due after delay) or RetryNone. The due time is the
// database's clock plus delay, so replicas with skewed clocks agree on it.
func (s *Store) DecideRetry(ctx context.Context, id int64, state string, delay time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, planRetrySQL, id, state, delay.Seconds())
	return tag.RowsAffected() == 1, mapErr(err)
}

// claimDueRetriesSQL leases due retries by pushing retry_at forward, so
// replicas running the same loop do not request the same retry at once; a
// lease that runs out (its executor died) makes the row due again.
const claimDueRetriesSQL = `
UPDATE executions x SET retry_at = clock_timestamp() + make_interval(secs => $1)
 WHERE x.id IN (SELECT id FROM executions
                 WHERE retry_state = 'pending' AND retry_at <= clock_timestamp()
                 ORDER BY retry_at LIMIT $2 FOR UPDATE SKIP LOCKED)
RETURNING x.id`

// ClaimDueRetries leases up to limit pending retries whose time has come
// for lease and returns their executions' ids.
func (s *Store) ClaimDueRetries(ctx context.Context, lease time.Duration, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, claimDueRetriesSQL, lease.Seconds(), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, mapErr(err)
}

const settleRetrySQL = `UPDATE executions SET retry_state = $2 WHERE id = $1 AND retry_state = 'pending'`

// SettleRetry ends a pending retry: RetryDone once the retry was requested
// (or found to exist), RetryNone when it can no longer be requested.
func (s *Store) SettleRetry(ctx context.Context, id int64, state string) error {
	_, err := s.pool.Exec(ctx, settleRetrySQL, id, state)
	return mapErr(err)
}

// undecidedSQL finds finished attempts of actions that retry whose
// completion was never handled (the execution.completed message was lost).
// It starts from the few actions with a retry policy so the attempts of
// all other actions, which are never decided, are not scanned.
const undecidedSQL = `
SELECT x.id FROM actions a
  JOIN executions x ON x.action_ref = a.ref
 WHERE jsonb_typeof(a.retry -> 'max_retries') = 'number' AND (a.retry ->> 'max_retries')::numeric >= 1
   AND x.retry_state IS NULL AND x.status IN ('failed', 'timeout', 'abandoned')
   AND x.finished_at < clock_timestamp() - make_interval(secs => $1)
   AND x.finished_at > clock_timestamp() - make_interval(secs => $2)
   AND x.attempt <= (a.retry ->> 'max_retries')::numeric
 ORDER BY x.finished_at LIMIT $3`

// UndecidedRetries returns attempts that finished between window and grace
// ago, may be retried by their action's policy and have no decision yet.
func (s *Store) UndecidedRetries(ctx context.Context, grace, window time.Duration, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, undecidedSQL, grace.Seconds(), window.Seconds(), limit)
	if err != nil {
		return nil, mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, mapErr(err)
}

const successorSQL = `SELECT id FROM executions WHERE retry_of = $1`

// SuccessorOf returns the id of the attempt that retried or replayed id;
// ErrNotFound when there is none.
func (s *Store) SuccessorOf(ctx context.Context, id int64) (int64, error) {
	var succ int64
	err := s.pool.QueryRow(ctx, successorSQL, id).Scan(&succ)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrNotFound
	}
	return succ, mapErr(err)
}
