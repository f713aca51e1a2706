package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/store"
)

// Engine is what the API asks of the executor side: requests, cancels and
// policy changes, each followed by the wake-up messages it calls for.
// *executor.Service satisfies it.
type Engine interface {
	RequestExecution(ctx context.Context, r executor.RunRequest) (store.Execution, error)
	CancelExecution(ctx context.Context, id int64) (store.Execution, error)
	RegisterAction(ctx context.Context, a store.Action) (store.Action, error)
	SetPolicy(ctx context.Context, ref string, p store.Policy) (store.Policy, error)
	SetPaused(ctx context.Context, ref string, paused bool) (store.Policy, error)
}

// Reader is what the API reads straight from the store, plus the operator's
// worker status changes. *store.Store satisfies it.
type Reader interface {
	GetExecution(ctx context.Context, id int64) (store.Execution, error)
	ListExecutions(ctx context.Context, f store.ExecutionFilter) ([]store.Execution, int64, error)
	GetAction(ctx context.Context, ref string) (store.Action, error)
	ListActions(ctx context.Context) ([]store.Action, error)
	QueueStats(ctx context.Context, actionRef string) ([]store.QueueStats, error)
	ListWorkers(ctx context.Context) ([]store.Worker, error)
	SetWorkerStatus(ctx context.Context, id, status string) (store.Worker, error)
}

// packCreator is implemented by readers that can create a pack (as
// *store.Store does): POST /actions uses it when an action names a pack that
// does not exist yet.
type packCreator interface {
	UpsertPack(ctx context.Context, p store.Pack) error
}

// maxBodyBytes bounds every request body.
const maxBodyBytes = 1 << 20

// api holds the handlers of /api/v1.
type api struct {
	engine Engine
	reader Reader
	log    *slog.Logger
}

// mountAPI mounts /api/v1 on r: bearer auth first, then 503 when this
// process does not run the API role, then the routes.
func mountAPI(r chi.Router, d Deps) {
	a := &api{engine: d.Engine, reader: d.Reader, log: d.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	r.Route("/api/v1", func(r chi.Router) {
		r.Use(requireToken(d.Token))
		r.Use(a.requireEnabled)
		r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeError(w, http.StatusNotFound, "not found", nil) })
		r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusMethodNotAllowed, "method not allowed", nil)
		})

		r.Post("/executions", a.createExecution)
		r.Get("/executions", a.listExecutions)
		r.Get("/executions/{id}", a.getExecution)
		r.Post("/executions/{id}/cancel", a.cancelExecution)

		r.Get("/actions", a.listActions)
		r.Post("/actions", a.registerAction)
		r.Get("/actions/{ref}", a.getAction)
		r.Get("/actions/{ref}/policy", a.getPolicy)
		r.Put("/actions/{ref}/policy", a.putPolicy)
		r.Post("/actions/{ref}/pause", a.setPaused(true))
		r.Post("/actions/{ref}/resume", a.setPaused(false))
		r.Get("/actions/{ref}/queue-stats", a.actionQueueStats)
		r.Get("/queues", a.listQueues)

		r.Get("/workers", a.listWorkers)
		r.Post("/workers/{id}/drain", a.setWorkerStatus(store.WorkerDraining))
		r.Post("/workers/{id}/cordon", a.setWorkerStatus(store.WorkerCordoned))
		r.Post("/workers/{id}/uncordon", a.setWorkerStatus(store.WorkerActive))

		mountDeadLetters(r, a)
	})
}

// requireEnabled answers 503 when the process was started without the API
// role's dependencies.
func (a *api) requireEnabled(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.engine == nil || a.reader == nil {
			writeError(w, http.StatusServiceUnavailable, "api role not enabled", nil)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fieldError names one bad input field (same shape as params.FieldError).
type fieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// decodeBody reads one JSON value of at most maxBodyBytes into v, refusing
// unknown fields. On failure it writes the error response and returns false.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	err := readBody(w, r, v)
	if err != nil {
		writeBodyError(w, err)
	}
	return err == nil
}

// readBody reads one JSON value of at most maxBodyBytes into v, refusing
// unknown fields and trailing data.
func readBody(w http.ResponseWriter, r *http.Request, v any) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	switch err := dec.Decode(&json.RawMessage{}); {
	case err == io.EOF:
		return nil
	case err == nil:
		return errors.New("request body holds more than one JSON value")
	default:
		return err
	}
}

// writeBodyError answers 400 (413 when too large) for a body readBody
// refused, naming the field when the decoder knows it.
func writeBodyError(w http.ResponseWriter, err error) {
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large", fmt.Sprintf("the limit is %d bytes", tooBig.Limit))
	case errors.Is(err, io.EOF):
		writeError(w, http.StatusBadRequest, "request body is empty", "expected a JSON object")
	case errors.As(err, &syntax):
		writeError(w, http.StatusBadRequest, "invalid JSON", fmt.Sprintf("%v (at byte %d)", syntax, syntax.Offset))
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "(body)"
		}
		writeError(w, http.StatusBadRequest, "invalid request body",
			[]fieldError{{Field: field, Message: "must be " + jsonKind(typeErr.Type.String()) + ", got " + typeErr.Value}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		writeError(w, http.StatusBadRequest, "invalid request body", []fieldError{{Field: name, Message: "unknown field"}})
	case errors.Is(err, io.ErrUnexpectedEOF):
		writeError(w, http.StatusBadRequest, "invalid JSON", "unexpected end of the request body")
	default:
		writeError(w, http.StatusBadRequest, "invalid request body", err.Error())
	}
}

// jsonKind names a Go type the way a JSON user thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	}
	return goType
}

// pathID parses the {id} URL parameter as a positive integer, writing 400
// when it is not one.
func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "invalid execution id", fmt.Sprintf("%q is not a positive integer", raw))
		return 0, false
	}
	return id, true
}

// pathParam returns a URL parameter, unescaped (refs and worker ids may be
// sent percent-encoded).
func pathParam(r *http.Request, name string) string {
	raw := chi.URLParam(r, name)
	if s, err := url.PathUnescape(raw); err == nil {
		return s
	}
	return raw
}

// fail writes the response for an error no handler mapped more precisely:
// not found → 404, conflict → 409, a gone client → nothing useful, the rest
// → 500 without internal details (logged instead).
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, "not found", err.Error())
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		writeError(w, http.StatusServiceUnavailable, "request cancelled", nil)
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, "timed out", nil)
	default:
		a.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, "internal error", "see the appliance log")
	}
}

// list is the envelope of every list response.
type list[T any] struct {
	Items []T `json:"items"`
}

// newList wraps items, always encoding an array (never null).
func newList[T any](items []T) list[T] {
	if items == nil {
		items = []T{}
	}
	return list[T]{Items: items}
}
