// Package web serves the appliance over HTTP: the JSON API under /api/v1,
// health probes, metrics and the dashboard, mounted in one routes file.
package web

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// Deps are what the HTTP layer needs from the rest of the appliance.
type Deps struct {
	Logger *slog.Logger
	Checks map[string]Check // readiness probes by part name
	Token  string           // admin API token
	// Engine serves the API's writes (requests, cancels, policies). When
	// Engine or Reader is nil, /api/v1 answers 503 "api role not enabled".
	Engine Engine
	// Reader serves the API's reads and worker status changes.
	Reader Reader
	// Metrics serves GET /metrics (see metrics.go: unauthenticated, like the
	// health probes); nil leaves the route out.
	Metrics http.Handler
	// Notifications feeds the dashboard's live updates (see
	// BrokerNotifications); nil leaves the dashboard polling the database's
	// change marks only.
	Notifications Notifications
}

// NewRouter mounts every route.
func NewRouter(d Deps) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(requestLogger(d.Logger))
	r.Get("/healthz", healthz)
	r.Get("/readyz", readyz(d.Checks))
	if d.Metrics != nil {
		r.Method(http.MethodGet, "/metrics", d.Metrics)
	}
	mountAPI(r, d)
	mountUI(r, d) // dashboard: /, /login, /queues, /executions, /workers, /dead-letters, /ui/events, /static/
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, "not found", nil) })
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, "method not allowed", nil)
	})
	return r
}

func requestLogger(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			start := time.Now()
			next.ServeHTTP(ww, r)
			if log != nil {
				log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", ww.Status(), "took", time.Since(start))
			}
		})
	}
}
