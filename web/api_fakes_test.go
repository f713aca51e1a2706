package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
)

const testToken = "s3cret-token"

// fakeEngine and fakeStore are small in-memory stand-ins for
// *executor.Service and *store.Store: enough to check routing, status
// codes and error shapes without PostgreSQL.
type fakeEngine struct {
	st       *fakeStore
	requests []executor.RunRequest
}

type fakeStore struct {
	mu         sync.Mutex
	execs      map[int64]store.Execution
	actions    map[string]store.Action
	packs      map[string]bool
	workers    map[string]store.Worker
	queues     []store.QueueStats
	lastFilter store.ExecutionFilter
	next       int64
	failWith   error // returned by every read when set
}

func newFakes() (*fakeEngine, *fakeStore) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := &fakeStore{
		execs: map[int64]store.Execution{
			7: {ID: 7, ActionRef: "core.noop", Status: store.StatusSucceeded, Parameters: json.RawMessage(`{}`),
				CreatedAt: created, FinishedAt: &created,
				Timeline: []store.Transition{{To: store.StatusRequested, At: created}}},
			8: {ID: 8, ActionRef: "core.sleep", Status: store.StatusQueued, CreatedAt: created.Add(123456 * time.Nanosecond)},
		},
		actions: map[string]store.Action{
			"core.noop": {Ref: "core.noop", Pack: "core", Name: "noop", Runtime: "builtin", Entrypoint: "noop",
				Policy: store.Policy{Paused: true}},
		},
		packs:   map[string]bool{"core": true},
		workers: map[string]store.Worker{"w1": {ID: "w1", Status: store.WorkerActive, HeartbeatAt: time.Now().Add(-2 * time.Second)}},
		queues:  []store.QueueStats{{ActionRef: "core.noop", GroupKey: "", QueueLength: 2}, {ActionRef: "x.y", QueueLength: 1}},
	}
	return &fakeEngine{st: st}, st
}

func (e *fakeEngine) RequestExecution(_ context.Context, r executor.RunRequest) (store.Execution, error) {
	e.requests = append(e.requests, r)
	switch r.ActionRef {
	case "core.full":
		return store.Execution{}, fmt.Errorf("%w: 10 waiting", store.ErrQueueFull)
	case "core.sleep":
		if _, ok := r.Parameters["seconds"].(float64); !ok {
			return store.Execution{}, &params.ValidationError{Fields: []params.FieldError{{Field: "seconds", Message: "must be a number"}}}
		}
	case "core.boom":
		return store.Execution{}, errors.New("pgx: connection refused to 10.0.0.1")
	case "core.noop":
	default:
		return store.Execution{}, fmt.Errorf("%w: %s", executor.ErrUnknownAction, r.ActionRef)
	}
	body, _ := json.Marshal(r.Parameters)
	return store.Execution{ID: 42, ActionRef: r.ActionRef, Parameters: body, Status: store.StatusRequested,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 120000000, time.UTC)}, nil
}

func (e *fakeEngine) CancelExecution(_ context.Context, id int64) (store.Execution, error) {
	x, ok := e.st.execs[id]
	if !ok {
		return x, store.ErrNotFound
	}
	if store.IsFinal(x.Status) {
		return x, fmt.Errorf("%w: already %s", store.ErrConflict, x.Status)
	}
	x.Status = store.StatusCancelled
	e.st.execs[id] = x
	return x, nil
}

func (e *fakeEngine) RegisterAction(_ context.Context, a store.Action) (store.Action, error) {
	if !e.st.packs[a.Pack] {
		return store.Action{}, fmt.Errorf("%w: pack %s", store.ErrNotFound, a.Pack)
	}
	e.st.actions[a.Ref] = a
	return a, nil
}

func (e *fakeEngine) SetPolicy(_ context.Context, ref string, p store.Policy) (store.Policy, error) {
	a, ok := e.st.actions[ref]
	if !ok {
		return p, store.ErrNotFound
	}
	a.Policy = p
	e.st.actions[ref] = a
	return p, nil
}

func (e *fakeEngine) SetPaused(ctx context.Context, ref string, paused bool) (store.Policy, error) {
	a, ok := e.st.actions[ref]
	if !ok {
		return store.Policy{}, store.ErrNotFound
	}
	a.Policy.Paused = paused
	return e.SetPolicy(ctx, ref, a.Policy)
}

func (s *fakeStore) GetExecution(_ context.Context, id int64) (store.Execution, error) {
	if s.failWith != nil {
		return store.Execution{}, s.failWith
	}
	x, ok := s.execs[id]
	if !ok {
		return x, store.ErrNotFound
	}
	return x, nil
}

func (s *fakeStore) ListExecutions(_ context.Context, f store.ExecutionFilter) ([]store.Execution, int64, error) {
	s.lastFilter = f
	if s.failWith != nil {
		return nil, 0, s.failWith
	}
	if f.ActionRef == "none" {
		return nil, 0, nil
	}
	return []store.Execution{s.execs[8], s.execs[7]}, s.next, nil
}

func (s *fakeStore) GetAction(_ context.Context, ref string) (store.Action, error) {
	a, ok := s.actions[ref]
	if !ok {
		return a, store.ErrNotFound
	}
	return a, nil
}

func (s *fakeStore) ListActions(context.Context) ([]store.Action, error) {
	var out []store.Action
	for _, a := range s.actions {
		out = append(out, a)
	}
	return out, nil
}

func (s *fakeStore) QueueStats(_ context.Context, ref string) ([]store.QueueStats, error) {
	var out []store.QueueStats
	for _, q := range s.queues {
		if ref == "" || q.ActionRef == ref {
			out = append(out, q)
		}
	}
	return out, nil
}

func (s *fakeStore) ListWorkers(context.Context) ([]store.Worker, error) {
	var out []store.Worker
	for _, w := range s.workers {
		out = append(out, w)
	}
	return out, nil
}

func (s *fakeStore) SetWorkerStatus(_ context.Context, id, status string) (store.Worker, error) {
	w, ok := s.workers[id]
	if !ok {
		return w, store.ErrNotFound
	}
	w.Status = status
	s.workers[id] = w
	return w, nil
}

func (s *fakeStore) UpsertPack(_ context.Context, p store.Pack) error {
	s.packs[p.Ref] = true
	return nil
}

// testServer serves the router over the fakes.
func testServer(t *testing.T) (*httptest.Server, *fakeEngine, *fakeStore) {
	t.Helper()
	eng, st := newFakes()
	srv := httptest.NewServer(NewRouter(Deps{Token: testToken, Engine: eng, Reader: st}))
	t.Cleanup(srv.Close)
	return srv, eng, st
}

// call sends a request with the test token and decodes the JSON answer.
func call(t *testing.T, srv *httptest.Server, method, path, body string) (int, map[string]any) {
	t.Helper()
	return callAuth(t, srv, method, path, body, "Bearer "+testToken)
}

func callAuth(t *testing.T, srv *httptest.Server, method, path, body, auth string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q, body %s", method, path, ct, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %v\n%s", method, path, err, raw)
	}
	return resp.StatusCode, out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
