package web

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/attune-io/attune/engine/store"
)

// /metrics (Prometheus text format) is served without the API token, like
// /healthz and /readyz: it holds counts, durations, action refs and worker
// ids, never parameters, results or secrets, and scrapers of a cluster would
// otherwise need each appliance's own token. Restrict who can reach it with
// http.addr (loopback by default) or the network, as for any exporter.
//
// Two kinds of metrics:
//   - cluster-wide gauges read from the database (executions in flight,
//     queues, dead letters, workers), exported by processes that run the api
//     or executor role; every such process shows the same values, so
//     aggregate them with max(), not sum(). They come from one batch of
//     cheap queries (see engine/store/metrics.go), cached for a few seconds;
//   - per-process counters and histograms (finished executions, dispatch
//     latency, run time, rejected late results), which sum over processes.

// MetricsSource reads the cluster-wide gauges. *store.Store satisfies it.
type MetricsSource interface {
	MetricsSnapshot(ctx context.Context) (store.MetricsSnapshot, error)
}

// MetricsConfig configures NewMetrics.
type MetricsConfig struct {
	// Source of the cluster-wide gauges; nil leaves them out (a worker-only
	// process).
	Source MetricsSource
	// CacheFor is how long a database snapshot is reused; default 5s.
	CacheFor time.Duration
	// Timeout bounds one snapshot; default 5s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// Metrics is the appliance's Prometheus registry. It also implements the
// worker engine's Observer (worker.Observer), which feeds the histograms.
type Metrics struct {
	reg      *prometheus.Registry
	dispatch *prometheus.HistogramVec
	run      *prometheus.HistogramVec
	rejected *prometheus.CounterVec
	handler  http.Handler
}

// NewMetrics builds the registry: Go and process collectors, per-process
// execution metrics and, with cfg.Source, the cluster-wide gauges.
func NewMetrics(cfg MetricsConfig) *Metrics {
	if cfg.CacheFor <= 0 {
		cfg.CacheFor = 5 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.dispatch = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "attune_execution_dispatch_latency_seconds",
		Help:    "Time from an execution's request to its start on a worker (queueing for a concurrency slot included), observed by the worker that starts it.",
		Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"action"})
	m.run = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "attune_execution_run_duration_seconds",
		Help:    "Run time of executions on this process's worker, by final status.",
		Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600},
	}, []string{"action", "status"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "attune_worker_late_results_rejected_total",
		Help: "Outcomes this process's worker dropped because the execution had been settled elsewhere (the worker was declared dead).",
	}, []string{"action"})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.dispatch, m.run, m.rejected, finishedCollector{},
	)
	if cfg.Source != nil {
		m.reg.MustRegister(&dbCollector{src: cfg.Source, cacheFor: cfg.CacheFor, timeout: cfg.Timeout, log: cfg.Logger})
	}
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the underlying registry (to add collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ExecutionStarted observes the dispatch latency of an execution that
// started on this process's worker.
func (m *Metrics) ExecutionStarted(actionRef string, waited time.Duration) {
	m.dispatch.WithLabelValues(actionRef).Observe(waited.Seconds())
}

// ExecutionFinished observes the run time of an execution whose outcome
// this process's worker recorded.
func (m *Metrics) ExecutionFinished(actionRef, status string, ran time.Duration) {
	m.run.WithLabelValues(actionRef, status).Observe(ran.Seconds())
}

// LateResultRejected counts an outcome dropped by the worker's fence.
func (m *Metrics) LateResultRejected(actionRef string) {
	m.rejected.WithLabelValues(actionRef).Inc()
}

var finishedDesc = prometheus.NewDesc("attune_executions_finished_total",
	"Executions this process moved to a final status (summed over a cluster's processes: every finished execution).",
	[]string{"status"}, nil)

// finishedCollector exports store.FinishedTotals.
type finishedCollector struct{}

// Describe implements prometheus.Collector.
func (finishedCollector) Describe(ch chan<- *prometheus.Desc) { ch <- finishedDesc }

// Collect implements prometheus.Collector.
func (finishedCollector) Collect(ch chan<- prometheus.Metric) {
	for status, n := range store.FinishedTotals() {
		ch <- prometheus.MustNewConstMetric(finishedDesc, prometheus.CounterValue, float64(n), status)
	}
}

var (
	dbUpDesc = prometheus.NewDesc("attune_metrics_database_up",
		"1 when the last database snapshot for the cluster-wide gauges succeeded.", nil, nil)
	executionsDesc = prometheus.NewDesc("attune_executions",
		"Executions in flight by status, cluster-wide (finished ones: attune_executions_finished_total).",
		[]string{"status"}, nil)
	queueLengthDesc = prometheus.NewDesc("attune_queue_length",
		"Executions waiting for a concurrency slot, per action (all group keys).", []string{"action"}, nil)
	queueActiveDesc = prometheus.NewDesc("attune_queue_active",
		"Executions holding a concurrency slot, per action (all group keys).", []string{"action"}, nil)
	dlqDepthDesc = prometheus.NewDesc("attune_dlq_depth",
		"Dead letters recorded and not replayed or discarded.", nil, nil)
	deadLettersDesc = prometheus.NewDesc("attune_dead_letters",
		"Dead letters not replayed or discarded, by reason (expired, rejected, …).", []string{"reason"}, nil)
	workersDesc = prometheus.NewDesc("attune_workers",
		"Workers by status (active, cordoned, draining, drained, inactive).", []string{"status"}, nil)
	heartbeatAgeDesc = prometheus.NewDesc("attune_worker_heartbeat_age_seconds",
		"Age of each worker's last heartbeat on the database's clock (workers gone for a day are left out).",
		[]string{"worker", "status"}, nil)
	workerRunningDesc = prometheus.NewDesc("attune_worker_running",
		"Executions running on each worker, as of its last heartbeat.", []string{"worker"}, nil)
	workerCapacityDesc = prometheus.NewDesc("attune_worker_capacity",
		"Concurrent executions each worker accepts.", []string{"worker"}, nil)
)

// dbCollector exports the cluster-wide gauges from a cached snapshot.
type dbCollector struct {
	src      MetricsSource
	cacheFor time.Duration
	timeout  time.Duration
	log      *slog.Logger

	mu   sync.Mutex // held during a refresh: concurrent scrapes share it
	at   time.Time
	snap store.MetricsSnapshot
}

// Describe implements prometheus.Collector.
func (c *dbCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{dbUpDesc, executionsDesc, queueLengthDesc, queueActiveDesc, dlqDepthDesc,
		deadLettersDesc, workersDesc, heartbeatAgeDesc, workerRunningDesc, workerCapacityDesc} {
		ch <- d
	}
}

// snapshot returns a snapshot younger than cacheFor, reading a new one if
// needed; ok is false when the database did not answer.
func (c *dbCollector) snapshot() (store.MetricsSnapshot, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.cacheFor {
		return c.snap, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap, err := c.src.MetricsSnapshot(ctx)
	if err != nil {
		c.log.Warn("metrics: database snapshot failed", "err", err)
		return store.MetricsSnapshot{}, false
	}
	c.snap, c.at = snap, time.Now()
	return snap, true
}

// Collect implements prometheus.Collector: the gauges of one snapshot,
// or only attune_metrics_database_up 0 when the database did not answer.
func (c *dbCollector) Collect(ch chan<- prometheus.Metric) {
	snap, ok := c.snapshot()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !ok {
		gauge(dbUpDesc, 0)
		return
	}
	gauge(dbUpDesc, 1)
	for status, n := range snap.Unfinished {
		gauge(executionsDesc, float64(n), status)
	}
	for _, q := range snap.Queues {
		gauge(queueLengthDesc, float64(q.Length), q.ActionRef)
		gauge(queueActiveDesc, float64(q.Active), q.ActionRef)
	}
	var depth int64
	for reason, n := range snap.DeadLetters {
		depth += n
		gauge(deadLettersDesc, float64(n), reason)
	}
	gauge(dlqDepthDesc, float64(depth))
	byStatus := map[string]int{}
	for _, st := range store.WorkerStatuses {
		byStatus[st] = 0
	}
	for _, w := range snap.Workers {
		byStatus[w.Status]++
		gauge(heartbeatAgeDesc, w.HeartbeatAge.Seconds(), w.ID, w.Status)
		gauge(workerRunningDesc, float64(w.Running), w.ID)
		gauge(workerCapacityDesc, float64(w.Capacity), w.ID)
	}
	for st, n := range byStatus {
		gauge(workersDesc, float64(n), st)
	}
}
