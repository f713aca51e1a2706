package store

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DeadLetter is one message RabbitMQ dead-lettered into attune.dlx.queue,
// as recorded by the executor's dead-letter handler.
type DeadLetter struct {
	ID                int64           `json:"id"`
	Queue             string          `json:"queue"`       // the queue it died in
	Exchange          string          `json:"exchange"`    // the exchange it was published to
	RoutingKey        string          `json:"routing_key"` // its original routing key
	Reason            string          `json:"reason"`      // x-death reason: expired, rejected, maxlen, …
	DeathCount        int64           `json:"death_count"`
	FirstDeathAt      *time.Time      `json:"first_death_at"`
	ExecutionID       *int64          `json:"execution_id"`
	MessageType       string          `json:"message_type"`
	MessageID         string          `json:"message_id"`
	Payload           []byte          `json:"payload"`
	Headers           json.RawMessage `json:"headers"`
	CreatedAt         time.Time       `json:"created_at"`
	ReplayedAt        *time.Time      `json:"replayed_at"`
	ReplayExecutionID *int64          `json:"replay_execution_id"`
	// DedupeKey identifies one death of one message; empty when the message
	// has no id (then every delivery is recorded: nothing tells them apart).
	DedupeKey string `json:"-"`
}

const deadLetterColumns = `id, queue, exchange, routing_key, reason, death_count, first_death_at, execution_id,
 message_type, message_id, payload, headers, created_at, replayed_at, replay_execution_id`

const insertDeadLetterSQL = `
INSERT INTO dead_letters (queue, exchange, routing_key, reason, death_count, first_death_at, execution_id,
                          message_type, message_id, payload, headers, dedupe_key)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, nullif($12, ''))
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id`

const deadLetterByKeySQL = `SELECT id FROM dead_letters WHERE dedupe_key = $1`

// RecordDeadLetter stores a dead letter once per dedupe key. It returns the
// record's id and whether this call created it (false: a duplicate delivery
// of a letter already recorded).
func (s *Store) RecordDeadLetter(ctx context.Context, d DeadLetter) (id int64, created bool, err error) {
	headers := d.Headers
	if len(headers) == 0 {
		headers = json.RawMessage(`{}`)
	}
	payload := d.Payload
	if payload == nil {
		payload = []byte{}
	}
	err = s.pool.QueryRow(ctx, insertDeadLetterSQL, d.Queue, d.Exchange, d.RoutingKey, d.Reason, max(d.DeathCount, 1),
		d.FirstDeathAt, d.ExecutionID, d.MessageType, d.MessageID, payload, headers, d.DedupeKey).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = s.pool.QueryRow(ctx, deadLetterByKeySQL, d.DedupeKey).Scan(&id)
		return id, false, mapErr(err)
	}
	return id, err == nil, mapErr(err)
}

func scanDeadLetter(row pgx.Row) (DeadLetter, error) {
	var d DeadLetter
	err := row.Scan(&d.ID, &d.Queue, &d.Exchange, &d.RoutingKey, &d.Reason, &d.DeathCount, &d.FirstDeathAt, &d.ExecutionID,
		&d.MessageType, &d.MessageID, &d.Payload, &d.Headers, &d.CreatedAt, &d.ReplayedAt, &d.ReplayExecutionID)
	return d, mapErr(err)
}

const getDeadLetterSQL = `SELECT ` + deadLetterColumns + ` FROM dead_letters WHERE id = $1`

// GetDeadLetter returns one record; ErrNotFound when there is none.
func (s *Store) GetDeadLetter(ctx context.Context, id int64) (DeadLetter, error) {
	return scanDeadLetter(s.pool.QueryRow(ctx, getDeadLetterSQL, id))
}

// DeadLetterFilter selects dead letters. Empty fields match everything.
type DeadLetterFilter struct {
	Reason   string
	Queue    string
	Replayed *bool // only records replayed (true) or not yet replayed (false)
	Before   int64 // keyset cursor: ids below this; 0 = newest
	Limit    int
}

// where renders the filter as a WHERE clause and its arguments.
func (f DeadLetterFilter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Reason != "" {
		add("reason = ?", f.Reason)
	}
	if f.Queue != "" {
		add("queue = ?", f.Queue)
	}
	if f.Replayed != nil {
		add("(replayed_at IS NOT NULL) = ?", *f.Replayed)
	}
	if f.Before > 0 {
		add("id < ?", f.Before)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// listDeadLettersSQL and deadLetterIDsSQL are completed by a filter's
// WHERE clause, an ORDER BY and a LIMIT.
const (
	listDeadLettersSQL = `SELECT ` + deadLetterColumns + ` FROM dead_letters`
	deadLetterIDsSQL   = `SELECT id FROM dead_letters`
)

// ListDeadLetters returns records newest first with keyset pagination;
// next is the cursor for the following page, 0 when there is none.
func (s *Store) ListDeadLetters(ctx context.Context, f DeadLetterFilter) (items []DeadLetter, next int64, err error) {
	if f.Limit <= 0 || f.Limit > 1000 {
		f.Limit = 100
	}
	where, args := f.where()
	args = append(args, f.Limit+1)
	q := listDeadLettersSQL + where + ` ORDER BY id DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, 0, mapErr(err)
	}
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeadLetter, error) { return scanDeadLetter(r) })
	if err != nil {
		return nil, 0, mapErr(err)
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		next = items[len(items)-1].ID
	}
	return items, next, nil
}

// DeadLetterIDs returns the ids of up to limit records matching f, newest
// first (the bulk API's filter form).
func (s *Store) DeadLetterIDs(ctx context.Context, f DeadLetterFilter, limit int) ([]int64, error) {
	where, args := f.where()
	args = append(args, limit)
	rows, err := s.pool.Query(ctx, deadLetterIDsSQL+where+` ORDER BY id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, mapErr(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return ids, mapErr(err)
}

const deleteDeadLettersSQL = `DELETE FROM dead_letters WHERE id = ANY($1) RETURNING id`

// DeleteDeadLetters discards records and returns the ids that existed.
func (s *Store) DeleteDeadLetters(ctx context.Context, ids []int64) ([]int64, error) {
	rows, err := s.pool.Query(ctx, deleteDeadLettersSQL, ids)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, mapErr(err)
}

const claimReplaySQL = `
UPDATE dead_letters SET replayed_at = clock_timestamp() WHERE id = $1 AND replayed_at IS NULL
RETURNING ` + deadLetterColumns

const unclaimReplaySQL = `UPDATE dead_letters SET replayed_at = NULL WHERE id = $1 AND replay_execution_id IS NULL`

const setReplayExecutionSQL = `UPDATE dead_letters SET replay_execution_id = $2 WHERE id = $1`

// ClaimReplay marks a record replayed (compare-and-swap on replayed_at) and
// returns it; ok is false when it was replayed already. ErrNotFound when
// there is no such record.
func (s *Store) ClaimReplay(ctx context.Context, id int64) (d DeadLetter, ok bool, err error) {
	d, err = scanDeadLetter(s.pool.QueryRow(ctx, claimReplaySQL, id))
	if errors.Is(err, ErrNotFound) {
		if _, gerr := s.GetDeadLetter(ctx, id); gerr != nil {
			return DeadLetter{}, false, gerr
		}
		return DeadLetter{}, false, nil
	}
	return d, err == nil, err
}

// UnclaimReplay undoes ClaimReplay when the replay itself failed, so the
// operator can try again.
func (s *Store) UnclaimReplay(ctx context.Context, id int64) error {
	_, err := s.pool.Exec(ctx, unclaimReplaySQL, id)
	return mapErr(err)
}

// SetReplayExecution links a replayed record to the execution the replay
// created.
func (s *Store) SetReplayExecution(ctx context.Context, id, executionID int64) error {
	_, err := s.pool.Exec(ctx, setReplayExecutionSQL, id, executionID)
	return mapErr(err)
}
