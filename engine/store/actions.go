package store

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

const upsertPackSQL = `
INSERT INTO packs (ref, description, path) VALUES ($1, $2, $3)
ON CONFLICT (ref) DO UPDATE SET description = EXCLUDED.description, path = EXCLUDED.path, updated_at = now()`

const upsertActionSQL = `
INSERT INTO actions (ref, pack_ref, name, description, runtime, entrypoint, parameters, timeout_seconds, retry)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (ref) DO UPDATE SET pack_ref = EXCLUDED.pack_ref, name = EXCLUDED.name, description = EXCLUDED.description,
    runtime = EXCLUDED.runtime, entrypoint = EXCLUDED.entrypoint, parameters = EXCLUDED.parameters,
    timeout_seconds = EXCLUDED.timeout_seconds, retry = EXCLUDED.retry, updated_at = now()`

const upsertPolicySQL = `
INSERT INTO policies (action_ref, concurrency_limit, group_by, on_limit, max_queue_length, queue_timeout_seconds,
                      rate_max, rate_window_seconds, paused)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (action_ref) DO UPDATE SET concurrency_limit = EXCLUDED.concurrency_limit, group_by = EXCLUDED.group_by,
    on_limit = EXCLUDED.on_limit, max_queue_length = EXCLUDED.max_queue_length,
    queue_timeout_seconds = EXCLUDED.queue_timeout_seconds, rate_max = EXCLUDED.rate_max,
    rate_window_seconds = EXCLUDED.rate_window_seconds, paused = EXCLUDED.paused, updated_at = now()`

// setGroupLimitsSQL copies a changed limit onto every queue of the action.
const setGroupLimitsSQL = `UPDATE admission_groups SET concurrency_limit = $2, updated_at = now() WHERE action_ref = $1`

const listGroupsOfActionSQL = `SELECT group_key FROM admission_groups WHERE action_ref = $1 ORDER BY group_key`

const admitHeadsSQL = `SELECT execution_id, woken, next_window_at FROM attune_admit_heads($1, $2)`

const selectActionSQL = `
SELECT a.ref, a.pack_ref, a.name, a.description, a.runtime, a.entrypoint, p.path, a.parameters, a.timeout_seconds, a.retry,
       a.created_at, a.updated_at,
       pol.concurrency_limit, coalesce(pol.group_by, '{}'), coalesce(pol.on_limit, 'enqueue'), pol.max_queue_length,
       pol.queue_timeout_seconds, pol.rate_max, pol.rate_window_seconds, coalesce(pol.paused, false)
FROM actions a JOIN packs p ON p.ref = a.pack_ref LEFT JOIN policies pol ON pol.action_ref = a.ref`

// UpsertPack registers or updates a pack.
func (s *Store) UpsertPack(ctx context.Context, p Pack) error {
	_, err := s.pool.Exec(ctx, upsertPackSQL, p.Ref, p.Description, p.Path)
	return mapErr(err)
}

// UpsertAction registers or replaces an action and its policy. Queues whose
// limit grew admit their waiting heads at once (returned for wake-up).
func (s *Store) UpsertAction(ctx context.Context, a Action) (Admission, error) {
	var adm Admission
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		retry := a.Retry
		if len(retry) == 0 {
			retry = json.RawMessage(`{}`)
		}
		params := a.Parameters
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		if _, err := tx.Exec(ctx, upsertActionSQL, a.Ref, a.Pack, a.Name, a.Description, a.Runtime, a.Entrypoint,
			params, a.TimeoutSeconds, retry); err != nil {
			return mapErr(err)
		}
		var err error
		adm, err = setPolicy(ctx, tx, a.Ref, a.Policy)
		return err
	})
	return adm, err
}

// SetPolicy replaces an action's policy and applies it to its queues in the
// same transaction: a raised limit admits heads at once, a lowered one
// admits nothing until the active count falls below it.
func (s *Store) SetPolicy(ctx context.Context, ref string, p Policy) (Admission, error) {
	var adm Admission
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM actions WHERE ref = $1`, ref).Scan(&one); err != nil {
			return mapErr(err)
		}
		var err error
		adm, err = setPolicy(ctx, tx, ref, p)
		return err
	})
	return adm, err
}

// SetPaused pauses or resumes every queue of an action; resuming admits the
// waiting heads in order.
func (s *Store) SetPaused(ctx context.Context, ref string, paused bool) (Admission, error) {
	var adm Admission
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		a, err := getAction(ctx, tx, ref)
		if err != nil {
			return err
		}
		p := a.Policy
		p.Paused = paused
		adm, err = setPolicy(ctx, tx, ref, p)
		return err
	})
	return adm, err
}

func setPolicy(ctx context.Context, tx pgx.Tx, ref string, p Policy) (Admission, error) {
	onLimit := p.Concurrency.OnLimit
	if onLimit == "" {
		onLimit = "enqueue"
	}
	groupBy := p.Concurrency.GroupBy
	if groupBy == nil {
		groupBy = []string{}
	}
	var rateMax *int
	var rateWindow *float64
	if p.RateLimit != nil {
		rateMax, rateWindow = &p.RateLimit.Max, &p.RateLimit.Window
	}
	if _, err := tx.Exec(ctx, upsertPolicySQL, ref, p.Concurrency.Limit, groupBy, onLimit, p.MaxQueueLength,
		p.QueueTimeout, rateMax, rateWindow, p.Paused); err != nil {
		return Admission{}, mapErr(err)
	}
	if _, err := tx.Exec(ctx, setGroupLimitsSQL, ref, p.Concurrency.Limit); err != nil {
		return Admission{}, mapErr(err)
	}
	rows, err := tx.Query(ctx, listGroupsOfActionSQL, ref)
	if err != nil {
		return Admission{}, mapErr(err)
	}
	groups, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return Admission{}, mapErr(err)
	}
	var adm Admission
	for _, g := range groups {
		if err := admitHeads(ctx, tx, ref, g, &adm); err != nil {
			return Admission{}, err
		}
	}
	return adm, nil
}

// admitHeads runs attune_admit_heads and collects what it did into adm.
func admitHeads(ctx context.Context, tx pgx.Tx, ref, group string, adm *Admission) error {
	rows, err := tx.Query(ctx, admitHeadsSQL, ref, group)
	if err != nil {
		return mapErr(err)
	}
	return collectAdmission(rows, adm)
}

// AdmitHeads promotes waiting heads of one queue (used when a rate window
// reopens).
func (s *Store) AdmitHeads(ctx context.Context, ref, group string) (Admission, error) {
	var adm Admission
	err := s.inTx(ctx, func(tx pgx.Tx) error { return admitHeads(ctx, tx, ref, group, &adm) })
	return adm, err
}

// GetAction returns one action with its policy.
func (s *Store) GetAction(ctx context.Context, ref string) (Action, error) {
	return getAction(ctx, s.pool, ref)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func getAction(ctx context.Context, q querier, ref string) (Action, error) {
	return scanAction(q.QueryRow(ctx, selectActionSQL+` WHERE a.ref = $1`, ref))
}

// ListActions returns every action ordered by ref.
func (s *Store) ListActions(ctx context.Context) ([]Action, error) {
	rows, err := s.pool.Query(ctx, selectActionSQL+` ORDER BY a.ref`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []Action
	for rows.Next() {
		a, err := scanAction(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, mapErr(rows.Err())
}

func scanAction(row pgx.Row) (Action, error) {
	var a Action
	var rateMax *int
	var rateWindow *float64
	err := row.Scan(&a.Ref, &a.Pack, &a.Name, &a.Description, &a.Runtime, &a.Entrypoint, &a.PackPath, &a.Parameters,
		&a.TimeoutSeconds, &a.Retry, &a.CreatedAt, &a.UpdatedAt,
		&a.Policy.Concurrency.Limit, &a.Policy.Concurrency.GroupBy, &a.Policy.Concurrency.OnLimit,
		&a.Policy.MaxQueueLength, &a.Policy.QueueTimeout, &rateMax, &rateWindow, &a.Policy.Paused)
	if err != nil {
		return Action{}, mapErr(err)
	}
	if rateMax != nil && rateWindow != nil {
		a.Policy.RateLimit = &RateLimit{Max: *rateMax, Window: *rateWindow}
	}
	return a, nil
}
