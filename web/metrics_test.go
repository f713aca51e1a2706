package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/attune-io/attune/engine/store"
)

type fakeMetricsSource struct {
	calls atomic.Int64
	fail  atomic.Bool
}

func (f *fakeMetricsSource) MetricsSnapshot(context.Context) (store.MetricsSnapshot, error) {
	f.calls.Add(1)
	if f.fail.Load() {
		return store.MetricsSnapshot{}, errors.New("database down")
	}
	return store.MetricsSnapshot{
		Unfinished:  map[string]int64{"requested": 2, "running": 3, "queued": 7, "scheduling": 0, "scheduled": 1, "canceling": 0},
		Queues:      []store.QueueMetric{{ActionRef: "core.sleep", Length: 7, Active: 1}},
		DeadLetters: map[string]int64{"expired": 4, "rejected": 1},
		Workers: []store.WorkerMetric{
			{ID: "w1", Status: "active", Running: 3, Capacity: 8, HeartbeatAge: 1500 * time.Millisecond},
			{ID: "w2", Status: "cordoned", Capacity: 4, HeartbeatAge: 40 * time.Second},
		},
	}, nil
}

func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func wantLines(t *testing.T, body string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(body, "\n"+l+"\n") {
			t.Errorf("missing line %q", l)
		}
	}
}

func TestMetricsExposeEveryFamily(t *testing.T) {
	src := &fakeMetricsSource{}
	m := NewMetrics(MetricsConfig{Source: src, CacheFor: time.Hour})
	m.ExecutionStarted("core.sleep", 3*time.Millisecond)
	m.ExecutionFinished("core.sleep", "succeeded", 2*time.Second)
	m.LateResultRejected("core.sleep")
	body := scrape(t, m.Handler())
	wantLines(t, body,
		`attune_metrics_database_up 1`,
		`attune_executions{status="running"} 3`,
		`attune_executions{status="queued"} 7`,
		`attune_executions{status="canceling"} 0`,
		`attune_queue_length{action="core.sleep"} 7`,
		`attune_queue_active{action="core.sleep"} 1`,
		`attune_dlq_depth 5`,
		`attune_dead_letters{reason="expired"} 4`,
		`attune_workers{status="active"} 1`,
		`attune_workers{status="cordoned"} 1`,
		`attune_workers{status="drained"} 0`,
		`attune_worker_heartbeat_age_seconds{status="active",worker="w1"} 1.5`,
		`attune_worker_running{worker="w1"} 3`,
		`attune_worker_capacity{worker="w2"} 4`,
		`attune_execution_dispatch_latency_seconds_bucket{action="core.sleep",le="0.005"} 1`,
		`attune_execution_dispatch_latency_seconds_count{action="core.sleep"} 1`,
		`attune_execution_run_duration_seconds_count{action="core.sleep",status="succeeded"} 1`,
		`attune_worker_late_results_rejected_total{action="core.sleep"} 1`,
	)
	for _, family := range []string{"attune_executions_finished_total{status=\"succeeded\"}", "go_goroutines", "process_"} {
		if !strings.Contains(body, family) {
			t.Errorf("missing %s", family)
		}
	}
	scrape(t, m.Handler())
	if n := src.calls.Load(); n != 1 {
		t.Errorf("the snapshot is cached: %d database reads for two scrapes", n)
	}
}

func TestMetricsSurviveADatabaseOutage(t *testing.T) {
	src := &fakeMetricsSource{}
	src.fail.Store(true)
	m := NewMetrics(MetricsConfig{Source: src, CacheFor: time.Nanosecond})
	body := scrape(t, m.Handler())
	wantLines(t, body, `attune_metrics_database_up 0`)
	if strings.Contains(body, "attune_executions{") {
		t.Error("no stale gauges when the database does not answer")
	}
	if !strings.Contains(body, "attune_executions_finished_total") {
		t.Error("per-process metrics are still served")
	}
	src.fail.Store(false)
	wantLines(t, scrape(t, m.Handler()), `attune_metrics_database_up 1`)
}

func TestWorkerOnlyMetricsHaveNoClusterGauges(t *testing.T) {
	body := scrape(t, NewMetrics(MetricsConfig{}).Handler())
	if strings.Contains(body, "attune_metrics_database_up") || strings.Contains(body, "attune_workers{") {
		t.Error("without a source there are no cluster-wide gauges")
	}
}

func TestMetricsRouteNeedsNoToken(t *testing.T) {
	m := NewMetrics(MetricsConfig{Source: &fakeMetricsSource{}})
	srv := httptest.NewServer(NewRouter(Deps{Token: "secret", Metrics: m.Handler()}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "attune_executions{") {
		t.Fatalf("GET /metrics without a token: %d\n%s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("content type %q", ct)
	}
	// Without the api role the API answers 503, /metrics and health stay.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/workers", nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/api/v1 without the api role: %d, want 503", resp2.StatusCode)
	}
}
