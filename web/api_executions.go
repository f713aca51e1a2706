package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// runBody is the body of POST /api/v1/executions.
type runBody struct {
	ActionRef  string         `json:"action_ref"`
	Parameters map[string]any `json:"parameters"`
	Timeout    *float64       `json:"timeout"` // seconds; overrides the action's
}

// maxListLimit is the largest page GET /executions serves.
const maxListLimit = 1000

// createExecution requests a run: 201 with the execution, 400 with one
// message per bad parameter, 404 for an unknown action, 429 when its queue
// is full.
func (a *api) createExecution(w http.ResponseWriter, r *http.Request) {
	var body runBody
	if !decodeBody(w, r, &body) {
		return
	}
	body.ActionRef = strings.TrimSpace(body.ActionRef)
	if body.ActionRef == "" {
		writeError(w, http.StatusBadRequest, "invalid request body", []fieldError{{Field: "action_ref", Message: "is required"}})
		return
	}
	e, err := a.engine.RequestExecution(r.Context(), executor.RunRequest{
		ActionRef: body.ActionRef, Parameters: body.Parameters, TimeoutSeconds: body.Timeout,
	})
	if err != nil {
		a.failRequest(w, r, body.ActionRef, err)
		return
	}
	writeJSON(w, http.StatusCreated, viewExecution(e))
}

// failRequest maps the errors of RequestExecution.
func (a *api) failRequest(w http.ResponseWriter, r *http.Request, ref string, err error) {
	var verr *params.ValidationError
	switch {
	case errors.Is(err, executor.ErrUnknownAction):
		writeError(w, http.StatusNotFound, "unknown action", map[string]string{"action_ref": ref})
	case errors.As(err, &verr):
		fields := make([]fieldError, 0, len(verr.Fields))
		for _, f := range verr.Fields {
			fields = append(fields, fieldError{Field: f.Field, Message: f.Message})
		}
		writeError(w, http.StatusBadRequest, "invalid parameters", fields)
	case errors.Is(err, store.ErrQueueFull):
		writeError(w, http.StatusTooManyRequests, "queue full", err.Error())
	default:
		a.fail(w, r, err)
	}
}

// listExecutions serves GET /executions?status=a,b&action_ref=&limit=&before=
// newest first: {"items": [...], "next": cursor or null}; pass the cursor
// back as before= for the next page.
func (a *api) listExecutions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var f store.ExecutionFilter
	for _, v := range q["status"] {
		for s := range strings.SplitSeq(v, ",") {
			s = strings.ToLower(strings.TrimSpace(s))
			if s == "" {
				continue
			}
			if !slices.Contains(store.AllStatuses, s) {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown status %q", s),
					map[string]any{"valid": store.AllStatuses})
				return
			}
			if !slices.Contains(f.Statuses, s) {
				f.Statuses = append(f.Statuses, s)
			}
		}
	}
	f.ActionRef = strings.TrimSpace(q.Get("action_ref"))
	f.Limit = 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, http.StatusBadRequest, "invalid limit",
				fmt.Sprintf("%q is not an integer between 1 and %d", v, maxListLimit))
			return
		}
		f.Limit = n
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "invalid before cursor", fmt.Sprintf("%q is not a positive integer", v))
			return
		}
		f.Before = n
	}
	items, next, err := a.reader.ListExecutions(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var cursor *int64
	if next > 0 {
		cursor = &next
	}
	writeJSON(w, http.StatusOK, struct {
		Items []executionView `json:"items"`
		Next  *int64          `json:"next"`
	}{viewExecutions(items), cursor})
}

// getExecution serves one execution with its timeline and, while it
// waits, its queue position.
func (a *api) getExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	e, err := a.reader.GetExecution(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "execution not found", map[string]int64{"id": id})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewExecution(e))
}

// cancelExecution cancels one execution: 200 with it (cancelled, or
// canceling while its worker stops it), 409 when it already finished.
func (a *api) cancelExecution(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	e, err := a.engine.CancelExecution(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "execution not found", map[string]int64{"id": id})
	case errors.Is(err, store.ErrConflict):
		details := map[string]any{"id": id}
		if cur, gerr := a.reader.GetExecution(r.Context(), id); gerr == nil {
			details["status"] = cur.Status
		}
		writeError(w, http.StatusConflict, "execution already finished", details)
	case err != nil:
		a.fail(w, r, err)
	default:
		writeJSON(w, http.StatusOK, viewExecution(e))
	}
}
