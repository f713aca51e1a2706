package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

// DeadLetterReader is what the dead-letter routes read and delete.
// *store.Store satisfies it. It is asked of Deps.Reader by type assertion
// (like packCreator) so readers that predate dead letters still compile;
// without it the routes answer 501.
type DeadLetterReader interface {
	ListDeadLetters(ctx context.Context, f store.DeadLetterFilter) ([]store.DeadLetter, int64, error)
	GetDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error)
	DeadLetterIDs(ctx context.Context, f store.DeadLetterFilter, limit int) ([]int64, error)
	DeleteDeadLetters(ctx context.Context, ids []int64) ([]int64, error)
}

// DeadLetterReplayer replays dead letters; *executor.Service satisfies it
// and is asked of Deps.Engine by type assertion.
type DeadLetterReplayer interface {
	ReplayDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error)
}

var (
	_ DeadLetterReader   = (*store.Store)(nil)
	_ DeadLetterReplayer = (*executor.Service)(nil)
)

// maxBulk bounds the records one bulk call acts on; a filter matching more
// acts on the newest maxBulk and the caller repeats.
const maxBulk = 1000

// mountDeadLetters mounts the dead-letter routes on the /api/v1 router.
//
//	GET    /dead-letters?reason=&queue=&replayed=&limit=&before=  {"items", "next"}
//	GET    /dead-letters/{id}
//	POST   /dead-letters/{id}/replay
//	DELETE /dead-letters/{id}
//	POST   /dead-letters/replay   {"ids": [...]} or {"reason": .., "queue": ..}
//	POST   /dead-letters/delete   {"ids": [...]} or {"reason": .., "queue": ..}
func mountDeadLetters(r chi.Router, a *api) {
	r.Get("/dead-letters", a.listDeadLetters)
	r.Post("/dead-letters/replay", a.bulkReplay)
	r.Post("/dead-letters/delete", a.bulkDelete)
	r.Get("/dead-letters/{id}", a.getDeadLetter)
	r.Delete("/dead-letters/{id}", a.deleteDeadLetter)
	r.Post("/dead-letters/{id}/replay", a.replayDeadLetter)
}

// deadLetterView is a record as the API shows it. The payload is embedded
// as JSON when it is JSON, as a string when it is other UTF-8 text, and
// base64-encoded otherwise; payload_encoding says which.
type deadLetterView struct {
	ID                int64           `json:"id"`
	Queue             string          `json:"queue"`
	Exchange          string          `json:"exchange"`
	RoutingKey        string          `json:"routing_key"`
	Reason            string          `json:"reason"`
	DeathCount        int64           `json:"death_count"`
	FirstDeathAt      *apiTime        `json:"first_death_at"`
	ExecutionID       *int64          `json:"execution_id"`
	MessageType       string          `json:"message_type"`
	MessageID         string          `json:"message_id"`
	Payload           json.RawMessage `json:"payload"`
	PayloadEncoding   string          `json:"payload_encoding"`
	Headers           json.RawMessage `json:"headers"`
	CreatedAt         apiTime         `json:"created_at"`
	ReplayedAt        *apiTime        `json:"replayed_at"`
	ReplayExecutionID *int64          `json:"replay_execution_id"`
}

func viewDeadLetter(d store.DeadLetter) deadLetterView {
	v := deadLetterView{ID: d.ID, Queue: d.Queue, Exchange: d.Exchange, RoutingKey: d.RoutingKey, Reason: d.Reason,
		DeathCount: d.DeathCount, FirstDeathAt: optTime(d.FirstDeathAt), ExecutionID: d.ExecutionID,
		MessageType: d.MessageType, MessageID: d.MessageID, Headers: rawOrNull(d.Headers),
		CreatedAt: apiTime(d.CreatedAt), ReplayedAt: optTime(d.ReplayedAt), ReplayExecutionID: d.ReplayExecutionID}
	switch {
	case len(d.Payload) > 0 && json.Valid(d.Payload):
		v.Payload, v.PayloadEncoding = d.Payload, "json"
	case utf8.Valid(d.Payload):
		v.Payload, _ = json.Marshal(string(d.Payload))
		v.PayloadEncoding = "text"
	default:
		v.Payload, _ = json.Marshal(base64.StdEncoding.EncodeToString(d.Payload))
		v.PayloadEncoding = "base64"
	}
	return v
}

// deadLetters returns the reader's dead-letter side, writing 501 when the
// configured reader has none.
func (a *api) deadLetters(w http.ResponseWriter) (DeadLetterReader, bool) {
	dl, ok := a.reader.(DeadLetterReader)
	if !ok {
		writeError(w, http.StatusNotImplemented, "dead letters not available", nil)
	}
	return dl, ok
}

// listDeadLetters serves newest first: {"items": [...], "next": cursor or
// null}; pass the cursor back as before= for the next page.
func (a *api) listDeadLetters(w http.ResponseWriter, r *http.Request) {
	dl, ok := a.deadLetters(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := store.DeadLetterFilter{Reason: strings.TrimSpace(q.Get("reason")), Queue: strings.TrimSpace(q.Get("queue")), Limit: 100}
	if v := q.Get("replayed"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid replayed filter", fmt.Sprintf("%q is not true or false", v))
			return
		}
		f.Replayed = &b
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, http.StatusBadRequest, "invalid limit", fmt.Sprintf("%q is not an integer between 1 and %d", v, maxListLimit))
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
	items, next, err := dl.ListDeadLetters(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]deadLetterView, 0, len(items))
	for _, d := range items {
		out = append(out, viewDeadLetter(d))
	}
	var cursor *int64
	if next > 0 {
		cursor = &next
	}
	writeJSON(w, http.StatusOK, struct {
		Items []deadLetterView `json:"items"`
		Next  *int64           `json:"next"`
	}{out, cursor})
}

// deadLetterID parses the {id} URL parameter, writing 400 when it is not a
// positive integer.
func deadLetterID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "invalid dead letter id", fmt.Sprintf("%q is not a positive integer", raw))
		return 0, false
	}
	return id, true
}

// getDeadLetter serves one record.
func (a *api) getDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := a.deadLetters(w)
	if !ok {
		return
	}
	id, ok := deadLetterID(w, r)
	if !ok {
		return
	}
	d, err := dl.GetDeadLetter(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, "dead letter not found", map[string]int64{"id": id})
		return
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewDeadLetter(d))
}

// deleteDeadLetter discards one record: 200 {"deleted": id}, 404 when
// there is none.
func (a *api) deleteDeadLetter(w http.ResponseWriter, r *http.Request) {
	dl, ok := a.deadLetters(w)
	if !ok {
		return
	}
	id, ok := deadLetterID(w, r)
	if !ok {
		return
	}
	gone, err := dl.DeleteDeadLetters(r.Context(), []int64{id})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if len(gone) == 0 {
		writeError(w, http.StatusNotFound, "dead letter not found", map[string]int64{"id": id})
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"deleted": id})
}

// replayDeadLetter replays one record (see executor.Service.ReplayDeadLetter
// for what that means): 200 with the record, now with replayed_at and, for
// an execution's dead letter, replay_execution_id.
func (a *api) replayDeadLetter(w http.ResponseWriter, r *http.Request) {
	rp, ok := a.engine.(DeadLetterReplayer)
	if !ok {
		writeError(w, http.StatusNotImplemented, "dead letter replay not available", nil)
		return
	}
	id, ok := deadLetterID(w, r)
	if !ok {
		return
	}
	d, err := rp.ReplayDeadLetter(r.Context(), id)
	if err != nil {
		status, msg, details := replayError(err)
		if status == 0 {
			a.fail(w, r, err)
			return
		}
		writeError(w, status, msg, details)
		return
	}
	writeJSON(w, http.StatusOK, viewDeadLetter(d))
}

// replayError maps a replay failure to status, message and details; status
// 0 means an unexpected error (a.fail decides).
func replayError(err error) (int, string, any) {
	var verr *params.ValidationError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "dead letter not found", err.Error()
	case errors.Is(err, store.ErrQueueFull):
		return http.StatusTooManyRequests, "queue full", err.Error()
	case errors.As(err, &verr):
		return http.StatusConflict, "cannot replay dead letter", "the action's parameters no longer accept it: " + verr.Error()
	case errors.Is(err, store.ErrConflict), errors.Is(err, executor.ErrUnknownAction):
		return http.StatusConflict, "cannot replay dead letter", err.Error()
	case errors.Is(err, broker.ErrUnroutable):
		return http.StatusConflict, "cannot replay dead letter", "its exchange and routing key no longer lead to any queue"
	}
	return 0, "", nil
}
