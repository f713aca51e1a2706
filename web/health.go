package web

import (
	"context"
	"net/http"
	"time"
)

// Check is one readiness probe: nil when the part answers.
type Check func(ctx context.Context) error

// healthz answers as long as the process serves HTTP.
func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz runs every check with a short deadline and names the parts that do
// not answer; 200 only when all do.
func readyz(checks map[string]Check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		parts := map[string]string{}
		ready := true
		for name, check := range checks {
			if err := check(ctx); err != nil {
				parts[name] = "not ready: " + err.Error()
				ready = false
			} else {
				parts[name] = "ready"
			}
		}
		status := http.StatusOK
		body := map[string]any{"status": "ready", "parts": parts}
		if !ready {
			status = http.StatusServiceUnavailable
			body["status"] = "not ready"
		}
		writeJSON(w, status, body)
	}
}
