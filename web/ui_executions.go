package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// executionsPerPage is the length of a page of /executions.
const executionsPerPage = 50

// executions serves /executions: newest first, filtered by status and
// action, keyset-paginated (?before=id), never counting the table.
func (u *uiServer) executions(w http.ResponseWriter, r *http.Request) {
	ctx, q := r.Context(), r.URL.Query()
	f := ui.ExecutionFilter{Status: strings.TrimSpace(q.Get("status")), Action: strings.TrimSpace(q.Get("action"))}
	if f.Status != "" && !slices.Contains(store.AllStatuses, f.Status) {
		f.Status = ""
	}
	if n, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && n > 0 {
		f.Before = n
	}
	sf := store.ExecutionFilter{ActionRef: f.Action, Before: f.Before, Limit: executionsPerPage}
	if f.Status != "" {
		sf.Statuses = []string{f.Status}
	}
	items, next, err := u.reader.ListExecutions(ctx, sf)
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	actions, err := u.reader.ListActions(ctx)
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	p := ui.ExecutionsPage{Layout: u.layout(w, r, ui.NavExecutions, "Executions"), Now: u.now(), Filter: f,
		Statuses: store.AllStatuses}
	for _, a := range actions {
		p.Actions = append(p.Actions, a.Ref)
	}
	if f.Action != "" && !slices.Contains(p.Actions, f.Action) {
		p.Actions = append(p.Actions, f.Action)
	}
	for _, e := range items {
		p.Rows = append(p.Rows, executionRow(e, p.Now))
	}
	if f.Before > 0 {
		first := f
		first.Before = 0
		p.Pager.FirstURL = first.URL()
	}
	if next > 0 {
		older := f
		older.Before = next
		p.Pager.NextURL = older.URL()
	}
	u.render(w, r, http.StatusOK, ui.ExecutionsView(p))
}

// executionRow converts an execution to a list row.
func executionRow(e store.Execution, now time.Time) ui.ExecutionRow {
	row := ui.ExecutionRow{ID: e.ID, ActionRef: e.ActionRef, Status: e.Status, Reason: valueOf(e.StatusReason),
		GroupKey: e.GroupKey, Worker: valueOf(e.Worker), CreatedAt: e.CreatedAt, Took: took(e, now)}
	return row
}

// took is how long an execution ran: finished−started, or so far.
func took(e store.Execution, now time.Time) *time.Duration {
	if e.DurationMs != nil {
		d := time.Duration(*e.DurationMs * float64(time.Millisecond))
		return &d
	}
	if e.StartedAt == nil {
		return nil
	}
	end := now
	if e.FinishedAt != nil {
		end = *e.FinishedAt
	}
	d := end.Sub(*e.StartedAt)
	return &d
}

// valueOf dereferences an optional value (zero when nil).
func valueOf[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// execution serves /executions/{id}.
func (u *uiServer) execution(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		u.renderError(w, r, http.StatusNotFound, "Not found", "Execution ids are positive whole numbers.")
		return
	}
	e, err := u.reader.GetExecution(r.Context(), id)
	if err != nil {
		u.failPage(w, r, err)
		return
	}
	now := u.now()
	p := ui.ExecutionPage{Layout: u.layout(w, r, ui.NavExecutions, fmt.Sprintf("Execution %d", id)), Now: now,
		CanCancel: !store.IsFinal(e.Status) && e.Status != store.StatusCanceling,
		Exec: ui.ExecutionDetail{ID: e.ID, ActionRef: e.ActionRef, Status: e.Status, Reason: valueOf(e.StatusReason),
			GroupKey: e.GroupKey, Worker: valueOf(e.Worker), Attempt: e.Attempt, RetryOf: e.RetryOf,
			Params: prettyJSON(e.Parameters), Result: prettyJSON(e.Result), Error: valueOf(e.Error),
			Stdout: valueOf(e.Stdout), Stderr: valueOf(e.Stderr), StdoutCut: e.StdoutTruncated, StderrCut: e.StderrTruncated,
			ExitCode: e.ExitCode, Took: took(e, now), QueuePosition: e.QueuePosition, CreatedAt: e.CreatedAt,
			AdmittedAt: e.AdmittedAt, ScheduledAt: e.ScheduledAt, StartedAt: e.StartedAt, FinishedAt: e.FinishedAt}}
	for i, t := range e.Timeline {
		entry := ui.TimelineEntry{From: valueOf(t.From), To: t.To, Reason: valueOf(t.Reason), Worker: valueOf(t.Worker), At: t.At}
		if i > 0 {
			entry.Since = t.At.Sub(e.Timeline[i-1].At)
		}
		p.Exec.Timeline = append(p.Exec.Timeline, entry)
	}
	u.render(w, r, http.StatusOK, ui.ExecutionView(p))
}

// prettyJSON indents a JSON value; empty and null become "".
func prettyJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var buf bytes.Buffer
	if json.Indent(&buf, raw, "", "  ") != nil {
		return string(raw)
	}
	return buf.String()
}

// cancel cancels an execution.
func (u *uiServer) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		u.renderError(w, r, http.StatusNotFound, "Not found", "Execution ids are positive whole numbers.")
		return
	}
	e, err := u.engine.CancelExecution(r.Context(), id)
	msg := fmt.Sprintf("Execution %d is %s.", id, e.Status)
	if errors.Is(err, store.ErrConflict) {
		err = userError(fmt.Sprintf("Execution %d has already finished.", id))
	}
	u.done(w, r, ui.ExecutionURL(id), err, msg)
}

// rerun requests a new execution of the same action with the same
// parameters, and shows it.
func (u *uiServer) rerun(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		u.renderError(w, r, http.StatusNotFound, "Not found", "Execution ids are positive whole numbers.")
		return
	}
	orig, err := u.reader.GetExecution(r.Context(), id)
	if err != nil {
		u.done(w, r, ui.ExecutionURL(id), err, "")
		return
	}
	var params map[string]any
	if len(orig.Parameters) > 0 {
		_ = json.Unmarshal(orig.Parameters, &params)
	}
	e, err := u.engine.RequestExecution(r.Context(), executor.RunRequest{ActionRef: orig.ActionRef, Parameters: params,
		TimeoutSeconds: orig.TimeoutSeconds})
	if err != nil {
		u.done(w, r, ui.ExecutionURL(id), err, "")
		return
	}
	u.done(w, r, ui.ExecutionURL(e.ID), nil, fmt.Sprintf("Re-ran execution %d as %d.", id, e.ID))
}
