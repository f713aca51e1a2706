package store_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/engine/store"
)

func TestChangeMarksMoveWithEveryChange(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	m0, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	assert.Zero(t, m0.LastExecution)

	registerAction(t, st, "t.one", store.Policy{Concurrency: store.Concurrency{Limit: intp(1)}})
	a := request(t, st, "t.one", "")
	b := request(t, st, "t.one", "")
	m1, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	assert.Equal(t, b, m1.LastExecution)
	assert.Greater(t, m1.LastTransition, m0.LastTransition)
	assert.Equal(t, int64(2), m1.Enqueued)
	assert.True(t, m1.QueuesUpdated.After(m0.QueuesUpdated))

	counts, err := st.CountUnfinished(ctx)
	require.NoError(t, err)
	var n int64
	for status, c := range counts {
		assert.False(t, store.IsFinal(status), status)
		n += c
	}
	assert.Equal(t, int64(2), n)

	finish(t, st, a)
	m2, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), m2.Completed)
	assert.Greater(t, m2.LastTransition, m1.LastTransition)

	require.NoError(t, st.RegisterWorker(ctx, store.Worker{ID: "w1", Host: "h", Capacity: 2, Runtimes: []string{"builtin"}}))
	m3, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	_, err = st.SetWorkerStatus(ctx, "w1", store.WorkerCordoned)
	require.NoError(t, err)
	m4, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, m3.Workers, m4.Workers)

	_, _, err = st.RecordDeadLetter(ctx, store.DeadLetter{Queue: "q", Reason: "rejected", Payload: []byte("x")})
	require.NoError(t, err)
	m5, err := st.ChangeMarks(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, m4.DeadLetters, m5.DeadLetters)
	assert.Equal(t, int64(1), m5.DeadLetterDepth)
}

// TestDashboardReadsAtScale measures the dashboard's queries over 1,000,000
// executions. It takes about a minute to load the rows, so it runs only
// with ATTUNE_SCALE_TEST=1.
func TestDashboardReadsAtScale(t *testing.T) {
	if os.Getenv("ATTUNE_SCALE_TEST") != "1" {
		t.Skip("set ATTUNE_SCALE_TEST=1 to load 1,000,000 executions and time the dashboard's reads")
	}
	url := testenv.DatabaseURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	load := time.Now()
	for _, q := range []string{
		`INSERT INTO packs (ref) VALUES ('p')`,
		`INSERT INTO actions (ref, pack_ref, name, runtime, entrypoint) SELECT 'p.a' || i, 'p', 'a' || i, 'builtin', 'noop' FROM generate_series(0, 19) i`,
		`ALTER TABLE executions DISABLE TRIGGER executions_status_history`,
		`INSERT INTO executions (action_ref, status, created_at, updated_at, started_at, finished_at, worker_id)
		 SELECT 'p.a' || (i % 20),
		        CASE WHEN i % 1000 = 0 THEN 'queued' WHEN i % 1000 = 1 THEN 'running' WHEN i % 50 = 2 THEN 'failed'
		             WHEN i % 200 = 3 THEN 'cancelled' ELSE 'succeeded' END,
		        now() - make_interval(secs => (1000000 - i) * 0.6), now(), now(), now(), 'w' || (i % 8)
		   FROM generate_series(1, 1000000) i`,
		`ALTER TABLE executions ENABLE TRIGGER executions_status_history`,
		`INSERT INTO execution_status_history (execution_id, to_status) SELECT id, status FROM executions WHERE id % 100 = 0`,
		`INSERT INTO admission_groups (action_ref, group_key, total_enqueued, total_completed) SELECT ref, '', 50000, 49000 FROM actions`,
		`VACUUM ANALYZE executions`,
	} {
		_, err := conn.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	t.Logf("loaded 1,000,000 executions in %v", time.Since(load).Round(time.Second))

	st, err := store.Open(ctx, store.Config{URL: url, Logger: testenv.Logger(t)})
	require.NoError(t, err)
	defer st.Close()
	var mid int64 = 500000
	measure := func(name string, limit time.Duration, fn func() error) {
		var took []time.Duration
		for range 7 {
			start := time.Now()
			require.NoError(t, fn(), name)
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("%-46s median %8v  max %8v", name, took[3].Round(10*time.Microsecond), took[6].Round(10*time.Microsecond))
		if limit > 0 {
			assert.Less(t, took[3], limit, name)
		}
	}
	list := func(f store.ExecutionFilter) func() error {
		return func() error {
			f.Limit = 50
			_, _, err := st.ListExecutions(ctx, f)
			return err
		}
	}
	measure("executions: newest page", 50*time.Millisecond, list(store.ExecutionFilter{}))
	measure("executions: page deep in the table", 50*time.Millisecond, list(store.ExecutionFilter{Before: mid}))
	measure("executions: status=failed", 50*time.Millisecond, list(store.ExecutionFilter{Statuses: []string{"failed"}}))
	measure("executions: status=queued (rare)", 50*time.Millisecond, list(store.ExecutionFilter{Statuses: []string{"queued"}}))
	measure("executions: action filter", 50*time.Millisecond, list(store.ExecutionFilter{ActionRef: "p.a7"}))
	measure("executions: status=failed + action, deep", 100*time.Millisecond, list(store.ExecutionFilter{Statuses: []string{"failed"}, ActionRef: "p.a2", Before: mid}))
	measure("execution detail", 20*time.Millisecond, func() error { _, err := st.GetExecution(ctx, mid); return err })
	measure("overview: in-flight counts (partial index)", 50*time.Millisecond, func() error { _, err := st.CountUnfinished(ctx); return err })
	measure("live feed: change marks", 20*time.Millisecond, func() error { _, err := st.ChangeMarks(ctx); return err })
	measure("overview: queue stats", 20*time.Millisecond, func() error { _, err := st.QueueStats(ctx, ""); return err })
	measure("overview: counts by status (full scan, cached 15 s)", 0, func() error { _, err := st.CountByStatus(ctx); return err })
}
