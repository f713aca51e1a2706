package store

import (
	"context"
	"encoding/json"
	"time"
)

// RequestResult is the outcome of one request of a batch.
type RequestResult struct {
	ID  int64 // 0 when Err is set
	Err error // ErrQueueFull, or nil
}

const requestBatchSQL = `SELECT idx, execution_id, woken, next_window_at, outcome
  FROM attune_request_batch($1, $2, $3, $4, $5, $6, $7)`

// RequestExecutions records many requests in one transaction, in the order
// given (the caller keeps requests of one queue in arrival order and sorts
// queues consistently, see attune_request_batch). One request's full queue
// does not fail the others.
func (s *Store) RequestExecutions(ctx context.Context, reqs []Request) ([]RequestResult, Admission, error) {
	n := len(reqs)
	actions, groups := make([]string, n), make([]string, n)
	params := make([]json.RawMessage, n)
	maxQ, attempts := make([]int32, n), make([]int32, n)
	timeouts := make([]*float64, n)
	retryOf := make([]*int64, n)
	for i, r := range reqs {
		actions[i], groups[i], maxQ[i], timeouts[i], retryOf[i] = r.ActionRef, r.GroupKey, int32(r.MaxQueueLength), r.TimeoutSeconds, r.RetryOf
		params[i] = r.Parameters
		if len(params[i]) == 0 {
			params[i] = json.RawMessage(`{}`)
		}
		attempts[i] = int32(max(r.Attempt, 1))
	}
	rows, err := s.pool.Query(ctx, requestBatchSQL, actions, params, groups, maxQ, timeouts, retryOf, attempts)
	if err != nil {
		return nil, Admission{}, mapErr(err)
	}
	defer rows.Close()
	out := make([]RequestResult, n)
	var adm Admission
	for rows.Next() {
		var idx int
		var eid *int64
		var woken bool
		var next *time.Time
		var outcome string
		if err := rows.Scan(&idx, &eid, &woken, &next, &outcome); err != nil {
			return nil, Admission{}, mapErr(err)
		}
		switch outcome {
		case "queue_full":
			out[idx-1].Err = ErrQueueFull
		case "created", "cancelled":
			out[idx-1].ID = *eid
		case "admitted":
			addAdmitted(&adm, eid, woken, next)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, Admission{}, mapErr(err)
	}
	return out, adm, nil
}
