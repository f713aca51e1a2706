package store

import (
	"context"
	"time"
)

// The dashboard's reads. Each is designed to stay fast with millions of
// executions: they touch primary keys, partial indexes and the small
// admission/worker/policy tables, never a full scan of executions.

// unfinishedSQL counts in-flight executions through the executions_unfinished
// partial index, whose size is the number of executions in flight, not the
// size of the table.
const unfinishedSQL = `
SELECT status, count(*) FROM executions
 WHERE status IN ('requested', 'scheduling', 'queued', 'scheduled', 'running', 'canceling')
 GROUP BY status`

// CountUnfinished returns how many executions are in each in-flight status
// (requested, scheduling, queued, scheduled, running, canceling). Unlike
// CountByStatus it does not scan finished rows.
func (s *Store) CountUnfinished(ctx context.Context) (map[string]int64, error) {
	rows, err := s.pool.Query(ctx, unfinishedSQL)
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

// ChangeMarks are cheap fingerprints of what the dashboard shows: when one
// differs from its previous value, the matching part of the dashboard is
// stale. Totals double as throughput counters.
type ChangeMarks struct {
	// LastTransition is the newest status-history id: it moves on every
	// execution status change, including new executions.
	LastTransition int64
	// LastExecution is the newest execution id.
	LastExecution int64
	// QueuesUpdated is the newest change of any admission queue or policy.
	QueuesUpdated time.Time
	// Workers fingerprints worker ids, statuses and loads (not heartbeats).
	Workers string
	// LastHeartbeat is the newest worker heartbeat.
	LastHeartbeat time.Time
	// DeadLetters fingerprints the dead-letter table (newest id, count,
	// newest replay).
	DeadLetters string
	// DeadLetterDepth counts dead letters neither replayed nor discarded.
	DeadLetterDepth int64
	// Enqueued and Completed sum every queue's total_enqueued and
	// total_completed counters.
	Enqueued, Completed int64
	// At is the database's clock when the marks were read.
	At time.Time
}

const changeMarksSQL = `
SELECT coalesce((SELECT max(id) FROM execution_status_history), 0),
       coalesce((SELECT max(id) FROM executions), 0),
       greatest(coalesce((SELECT max(updated_at) FROM admission_groups), 'epoch'),
                coalesce((SELECT max(updated_at) FROM policies), 'epoch')),
       coalesce((SELECT md5(string_agg(id || ':' || status || ':' || running, ',' ORDER BY id)) FROM workers), ''),
       coalesce((SELECT max(heartbeat_at) FROM workers), 'epoch'),
       (SELECT coalesce(max(id), 0) || ':' || count(*) || ':' || coalesce(max(replayed_at)::text, '') FROM dead_letters),
       (SELECT count(*) FROM dead_letters WHERE replayed_at IS NULL),
       coalesce((SELECT sum(total_enqueued) FROM admission_groups), 0)::bigint,
       coalesce((SELECT sum(total_completed) FROM admission_groups), 0)::bigint,
       clock_timestamp()`

// ChangeMarks reads the dashboard's change fingerprints in one round trip.
// The dead-letter count scans dead_letters, which holds failures only; every
// other part is an index lookup or a scan of a small table.
func (s *Store) ChangeMarks(ctx context.Context) (ChangeMarks, error) {
	var m ChangeMarks
	err := s.pool.QueryRow(ctx, changeMarksSQL).Scan(&m.LastTransition, &m.LastExecution, &m.QueuesUpdated,
		&m.Workers, &m.LastHeartbeat, &m.DeadLetters, &m.DeadLetterDepth, &m.Enqueued, &m.Completed, &m.At)
	return m, mapErr(err)
}
