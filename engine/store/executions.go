package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrQueueFull is returned when a request would exceed max_queue_length.
var ErrQueueFull = errors.New("queue full")

// Request is a new execution to record.
type Request struct {
	ActionRef      string
	Parameters     json.RawMessage
	GroupKey       string
	MaxQueueLength int
	TimeoutSeconds *float64
	RetryOf        *int64
	Attempt        int
}

const requestSQL = `SELECT execution_id, woken, next_window_at, outcome FROM attune_request($1, $2, $3, $4, $5, $6, $7)`

// RequestExecution records an execution in its FIFO queue and admits heads
// if slots are free. It returns the new execution's id and what admission
// did; ErrQueueFull when the queue is at its maximum. An execution refused
// by on_limit=cancel is recorded as cancelled and its id returned.
func (s *Store) RequestExecution(ctx context.Context, r Request) (int64, Admission, error) {
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	params := r.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	rows, err := s.pool.Query(ctx, requestSQL, r.ActionRef, params, r.GroupKey, r.MaxQueueLength, r.TimeoutSeconds, r.RetryOf, r.Attempt)
	if err != nil {
		return 0, Admission{}, mapErr(err)
	}
	defer rows.Close()
	var id int64
	var adm Admission
	full := false
	for rows.Next() {
		var eid *int64
		var woken bool
		var next *time.Time
		var outcome string
		if err := rows.Scan(&eid, &woken, &next, &outcome); err != nil {
			return 0, Admission{}, mapErr(err)
		}
		switch outcome {
		case "queue_full":
			full = true
		case "created":
			id = *eid
		case "cancelled":
			id = *eid
			countFinished(StatusCancelled)
		case "admitted":
			addAdmitted(&adm, eid, woken, next)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, Admission{}, mapErr(err)
	}
	if full {
		return 0, Admission{}, ErrQueueFull
	}
	return id, adm, nil
}

func addAdmitted(adm *Admission, eid *int64, woken bool, next *time.Time) {
	if eid != nil && woken {
		adm.Woken = append(adm.Woken, *eid)
	}
	if next != nil {
		adm.NextWindowAt = next
	}
}

// collectAdmission reads (execution_id, woken, next_window_at) rows.
func collectAdmission(rows pgx.Rows, adm *Admission) error {
	defer rows.Close()
	for rows.Next() {
		var eid *int64
		var woken bool
		var next *time.Time
		if err := rows.Scan(&eid, &woken, &next); err != nil {
			return mapErr(err)
		}
		addAdmitted(adm, eid, woken, next)
	}
	return mapErr(rows.Err())
}

// Claim is what the executor learned when it claimed an execution.
type Claim struct {
	ID       int64
	Status   string // status after the claim
	Admitted bool   // holds a concurrency slot
	Runtime  string
	Created  time.Time
}

// claimSQL and peekSQL return the action's runtime with the row, so the
// executor learns everything it needs to pick a worker in one round trip.
const claimSQL = `
UPDATE executions x SET status = 'scheduling', status_reason = 'claimed by executor', updated_at = clock_timestamp()
  FROM actions a
 WHERE x.id = $1 AND x.status = 'requested' AND a.ref = x.action_ref
RETURNING x.id, x.status, x.admitted_at IS NOT NULL, x.created_at, a.runtime`

const peekSQL = `
SELECT x.id, x.status, x.admitted_at IS NOT NULL, x.created_at, a.runtime
  FROM executions x JOIN actions a ON a.ref = x.action_ref WHERE x.id = $1`

const markQueuedSQL = `
UPDATE executions SET status = 'queued', status_reason = 'waiting for a concurrency slot', updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'scheduling' AND admitted_at IS NULL`

func scanClaim(row pgx.Row, c *Claim) error {
	return row.Scan(&c.ID, &c.Status, &c.Admitted, &c.Created, &c.Runtime)
}

// ClaimForScheduling moves requested → scheduling (compare-and-swap). A row
// already in scheduling (a wake-up or a re-driven message) is returned too so
// it can be dispatched; its later CAS to scheduled decides the single winner.
// A claimed row without a slot is moved to queued. ok is false when there is
// nothing to do.
func (s *Store) ClaimForScheduling(ctx context.Context, id int64) (c Claim, ok bool, err error) {
	err = scanClaim(s.pool.QueryRow(ctx, claimSQL, id), &c)
	if errors.Is(err, pgx.ErrNoRows) {
		err = scanClaim(s.pool.QueryRow(ctx, peekSQL, id), &c)
	}
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Claim{}, false, nil
		}
		return Claim{}, false, mapErr(err)
	}
	if c.Status != StatusScheduling {
		return c, false, nil
	}
	if !c.Admitted {
		tag, err := s.pool.Exec(ctx, markQueuedSQL, id)
		if err != nil {
			return c, false, mapErr(err)
		}
		if tag.RowsAffected() == 1 {
			c.Status = StatusQueued
			return c, false, nil
		}
		// Promoted between the claim and now: admitted_at is set, dispatch it.
		if err := scanClaim(s.pool.QueryRow(ctx, peekSQL, id), &c); err != nil {
			return c, false, mapErr(err)
		}
		if c.Status != StatusScheduling || !c.Admitted {
			return c, false, nil
		}
	}
	return c, true, nil
}

const scheduleSQL = `
UPDATE executions SET status = 'scheduled', worker_id = $2, scheduled_at = clock_timestamp(),
       status_reason = 'dispatched to worker ' || $2, updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'scheduling' AND admitted_at IS NOT NULL
RETURNING attempt`

// MarkScheduled moves scheduling → scheduled on workerID; ok is false when
// another executor won the race.
func (s *Store) MarkScheduled(ctx context.Context, id int64, workerID string) (attempt int, ok bool, err error) {
	err = s.pool.QueryRow(ctx, scheduleSQL, id, workerID).Scan(&attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return attempt, err == nil, mapErr(err)
}

const unscheduleSQL = `
UPDATE executions SET status = 'requested', worker_id = NULL, scheduled_at = NULL, status_reason = $3, updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'scheduled' AND worker_id = $2`

// ReturnToRequested undoes a dispatch whose publish failed, so the execution
// is claimed and dispatched again; it keeps its concurrency slot.
func (s *Store) ReturnToRequested(ctx context.Context, id int64, workerID, reason string) (bool, error) {
	tag, err := s.pool.Exec(ctx, unscheduleSQL, id, workerID, reason)
	return tag.RowsAffected() == 1, mapErr(err)
}

// Run is what a worker needs to run an execution it started.
type Run struct {
	ID             int64
	ActionRef      string
	Parameters     map[string]any
	TimeoutSeconds float64
	Runtime        string
	Entrypoint     string
	PackPath       string
	Waited         time.Duration // from request (created_at) to start, on the database's clock
}

const startSQL = `
UPDATE executions x SET status = 'running', started_at = clock_timestamp(), updated_at = clock_timestamp(),
       status_reason = 'started on worker ' || $2
  FROM actions a JOIN packs p ON p.ref = a.pack_ref
 WHERE x.id = $1 AND x.status = 'scheduled' AND x.worker_id = $2 AND x.attempt = $3 AND a.ref = x.action_ref
RETURNING x.id, x.action_ref, x.parameters, coalesce(x.timeout_seconds, a.timeout_seconds), a.runtime, a.entrypoint, p.path,
          extract(epoch FROM x.started_at - x.created_at)::float8`

// StartRun moves scheduled → running, fenced on worker and attempt; ok is
// false for a duplicate or stale dispatch.
func (s *Store) StartRun(ctx context.Context, id int64, workerID string, attempt int) (r Run, ok bool, err error) {
	var waited float64
	err = s.pool.QueryRow(ctx, startSQL, id, workerID, attempt).Scan(&r.ID, &r.ActionRef, &r.Parameters,
		&r.TimeoutSeconds, &r.Runtime, &r.Entrypoint, &r.PackPath, &waited)
	r.Waited = time.Duration(waited * float64(time.Second))
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, false, nil
	}
	return r, err == nil, mapErr(err)
}

// Outcome is the end of an execution as recorded by Finish.
type Outcome struct {
	Status          string
	Reason          string
	Result          json.RawMessage
	Error           *string
	Stdout, Stderr  *string
	StdoutTruncated bool
	StderrTruncated bool
	ExitCode        *int
	DurationMs      *float64
}

// Fence restricts a write to the worker and attempt that own the execution.
type Fence struct {
	WorkerID string
	Attempt  int
}

const finishSQL = `SELECT execution_id, woken, next_window_at, finished
  FROM attune_finish($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`

// Finish moves an execution from one of from to its final status, records
// the outcome and frees its slot in the same transaction (exactly once: the
// admission entry is deleted). finished is false when the CAS lost.
func (s *Store) Finish(ctx context.Context, id int64, from []string, fence *Fence, o Outcome) (finished bool, adm Admission, err error) {
	var worker *string
	var attempt *int
	if fence != nil {
		worker, attempt = &fence.WorkerID, &fence.Attempt
	}
	var result any
	if len(o.Result) > 0 {
		result = o.Result
	}
	rows, err := s.pool.Query(ctx, finishSQL, id, from, o.Status, worker, attempt, o.Reason, result, o.Error,
		o.Stdout, o.Stderr, o.StdoutTruncated, o.StderrTruncated, o.ExitCode, o.DurationMs)
	if err != nil {
		return false, adm, mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var eid *int64
		var woken, fin bool
		var next *time.Time
		if err := rows.Scan(&eid, &woken, &next, &fin); err != nil {
			return false, adm, mapErr(err)
		}
		if fin {
			finished = true
			countFinished(o.Status)
			continue
		}
		addAdmitted(&adm, eid, woken, next)
	}
	return finished, adm, mapErr(rows.Err())
}

// Unstarted are the statuses an execution can be cancelled from at once.
var Unstarted = []string{StatusRequested, StatusScheduling, StatusQueued, StatusScheduled}

const requestCancelSQL = `
UPDATE executions SET status = 'canceling', status_reason = $2, cancel_requested_at = clock_timestamp(),
       updated_at = clock_timestamp()
 WHERE id = $1 AND status = 'running'
RETURNING worker_id, attempt`

// CancelResult says what Cancel did.
type CancelResult struct {
	Cancelled bool   // was not running: now cancelled
	Canceling bool   // running: now canceling, the worker must be told
	WorkerID  string // the worker running it
	Attempt   int
	Admission Admission
}

// Cancel cancels an execution: at once when it has not started, by moving
// it to canceling when it runs. ErrConflict when it already finished,
// ErrNotFound when there is no such execution.
func (s *Store) Cancel(ctx context.Context, id int64, reason string) (CancelResult, error) {
	for range 3 {
		fin, adm, err := s.Finish(ctx, id, Unstarted, nil, Outcome{Status: StatusCancelled, Reason: reason})
		if err != nil {
			return CancelResult{}, err
		}
		if fin {
			return CancelResult{Cancelled: true, Admission: adm}, nil
		}
		var worker *string
		var attempt int
		err = s.pool.QueryRow(ctx, requestCancelSQL, id, reason).Scan(&worker, &attempt)
		if err == nil {
			return CancelResult{Canceling: true, WorkerID: deref(worker), Attempt: attempt}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return CancelResult{}, mapErr(err)
		}
		var status string
		var w *string
		if err := s.pool.QueryRow(ctx, `SELECT status, worker_id, attempt FROM executions WHERE id = $1`, id).Scan(&status, &w, &attempt); err != nil {
			return CancelResult{}, mapErr(err)
		}
		if status == StatusCanceling {
			return CancelResult{Canceling: true, WorkerID: deref(w), Attempt: attempt}, nil
		}
		if IsFinal(status) {
			return CancelResult{}, fmt.Errorf("%w: execution %d already %s", ErrConflict, id, status)
		}
		// It moved between our statements (e.g. scheduled → running); try again.
	}
	return CancelResult{}, fmt.Errorf("%w: execution %d keeps changing state", ErrConflict, id)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
