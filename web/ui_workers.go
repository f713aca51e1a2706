package web

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// workers serves /workers.
func (u *uiServer) workers(w http.ResponseWriter, r *http.Request) {
	ws, err := u.reader.ListWorkers(r.Context())
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	now := u.now()
	p := ui.WorkersPage{Layout: u.layout(w, r, ui.NavWorkers, "Workers"), Now: now}
	for _, wk := range ws {
		p.Workers = append(p.Workers, ui.WorkerRow{ID: wk.ID, Host: wk.Host, Status: wk.Status, HeartbeatAt: wk.HeartbeatAt,
			Stale: wk.Status != store.WorkerInactive && !workerUp(wk, now), Running: wk.Running, Capacity: wk.Capacity,
			Runtimes: wk.Runtimes, Version: wk.Version, StartedAt: wk.StartedAt})
	}
	u.render(w, r, http.StatusOK, ui.WorkersView(p))
}

// workerOps maps /workers/{op} to the status it sets and what it says.
var workerOps = map[string]struct{ status, done string }{
	"drain":    {store.WorkerDraining, "is draining: it finishes its work and takes no more"},
	"cordon":   {store.WorkerCordoned, "is cordoned: it takes no new work"},
	"uncordon": {store.WorkerActive, "is active again"},
}

// workerOp drains, cordons or uncordons the worker named by the form's id.
func (u *uiServer) workerOp(w http.ResponseWriter, r *http.Request) {
	op, ok := workerOps[chi.URLParam(r, "op")]
	if !ok {
		u.renderError(w, r, http.StatusNotFound, "Not found", "Unknown worker action.")
		return
	}
	id := strings.TrimSpace(r.PostFormValue("id"))
	_, err := u.reader.SetWorkerStatus(r.Context(), id, op.status)
	u.done(w, r, "/workers", err, "Worker "+id+" "+op.done+".")
}
