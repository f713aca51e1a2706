package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// listWorkers serves {"items": [...]}, each worker with
// heartbeat_age_seconds.
func (a *api) listWorkers(w http.ResponseWriter, r *http.Request) {
	ws, err := a.reader.ListWorkers(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	now := time.Now()
	out := make([]workerView, 0, len(ws))
	for _, wk := range ws {
		out = append(out, viewWorker(wk, now))
	}
	writeJSON(w, http.StatusOK, newList(out))
}

// setWorkerStatus drains (finish in-flight work, take no more), cordons
// (take no more) or uncordons (active again) a worker: 200 with the worker.
func (a *api) setWorkerStatus(status string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := pathParam(r, "id")
		wk, err := a.reader.SetWorkerStatus(r.Context(), id, status)
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, "unknown worker", map[string]string{"id": id})
			return
		}
		if err != nil {
			a.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, viewWorker(wk, time.Now()))
	}
}
