package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// fakeDeadLetters adds the dead-letter side to fakeStore.
type fakeDeadLetters struct {
	*fakeStore
	mu         sync.Mutex
	recs       map[int64]store.DeadLetter
	lastFilter store.DeadLetterFilter
}

func (f *fakeDeadLetters) ListDeadLetters(_ context.Context, flt store.DeadLetterFilter) ([]store.DeadLetter, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastFilter = flt
	var out []store.DeadLetter
	for _, d := range f.recs {
		if (flt.Reason == "" || d.Reason == flt.Reason) && (flt.Queue == "" || d.Queue == flt.Queue) &&
			(flt.Before == 0 || d.ID < flt.Before) && (flt.Replayed == nil || (d.ReplayedAt != nil) == *flt.Replayed) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(a, b store.DeadLetter) int { return int(b.ID - a.ID) })
	var next int64
	if len(out) > flt.Limit {
		out = out[:flt.Limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

func (f *fakeDeadLetters) GetDeadLetter(_ context.Context, id int64) (store.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.recs[id]
	if !ok {
		return d, store.ErrNotFound
	}
	return d, nil
}

func (f *fakeDeadLetters) DeadLetterIDs(ctx context.Context, flt store.DeadLetterFilter, limit int) ([]int64, error) {
	flt.Limit = limit
	items, _, _ := f.ListDeadLetters(ctx, flt)
	var ids []int64
	for _, d := range items {
		ids = append(ids, d.ID)
	}
	return ids, nil
}

func (f *fakeDeadLetters) DeleteDeadLetters(_ context.Context, ids []int64) ([]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var gone []int64
	for _, id := range ids {
		if _, ok := f.recs[id]; ok {
			delete(f.recs, id)
			gone = append(gone, id)
		}
	}
	return gone, nil
}

// fakeReplayer adds replay to fakeEngine: records in queue "full" hit a
// full queue, replayed ones conflict, others get execution 500+id.
type fakeReplayer struct {
	*fakeEngine
	dl *fakeDeadLetters
}

func (f *fakeReplayer) ReplayDeadLetter(_ context.Context, id int64) (store.DeadLetter, error) {
	f.dl.mu.Lock()
	defer f.dl.mu.Unlock()
	d, ok := f.dl.recs[id]
	switch {
	case !ok:
		return d, store.ErrNotFound
	case d.ReplayedAt != nil:
		return d, fmt.Errorf("%w: dead letter %d was already replayed", store.ErrConflict, id)
	case d.Queue == "full":
		return d, fmt.Errorf("%w: 10 waiting", store.ErrQueueFull)
	}
	now := time.Now()
	d.ReplayedAt = &now
	if d.ExecutionID != nil {
		exec := 500 + id
		d.ReplayExecutionID = &exec
	}
	f.dl.recs[id] = d
	return d, nil
}

func deadLetterServer(t *testing.T) (*httptest.Server, *fakeDeadLetters) {
	t.Helper()
	eng, st := newFakes()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	exec := int64(7)
	dl := &fakeDeadLetters{fakeStore: st, recs: map[int64]store.DeadLetter{
		1: {ID: 1, Queue: "worker.w1.executions", Reason: "expired", DeathCount: 1, FirstDeathAt: &at, ExecutionID: &exec,
			MessageType: "execution.dispatch", Payload: []byte(`{"execution_id":7}`), Headers: []byte(`{"x-death":[]}`), CreatedAt: at},
		2: {ID: 2, Queue: "attune.execution.requests.queue", Reason: "rejected", Payload: []byte("not json"), CreatedAt: at},
		3: {ID: 3, Queue: "attune.execution.requests.queue", Reason: "rejected", Payload: []byte{0xff, 0x01}, CreatedAt: at},
		4: {ID: 4, Queue: "full", Reason: "expired", ExecutionID: &exec, Payload: []byte(`{}`), CreatedAt: at},
	}}
	srv := httptest.NewServer(NewRouter(Deps{Token: testToken, Engine: &fakeReplayer{fakeEngine: eng, dl: dl}, Reader: dl}))
	t.Cleanup(srv.Close)
	return srv, dl
}

func TestDeadLetterListFiltersAndPages(t *testing.T) {
	srv, dl := deadLetterServer(t)
	code, body := call(t, srv, "GET", "/api/v1/dead-letters?reason=rejected&limit=1", "")
	if code != http.StatusOK {
		t.Fatalf("%d %v", code, body)
	}
	items := body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != float64(3) || body["next"] != float64(3) {
		t.Fatalf("first page: %v", body)
	}
	if dl.lastFilter.Reason != "rejected" || dl.lastFilter.Limit != 1 {
		t.Fatalf("filter %+v", dl.lastFilter)
	}
	_, body = call(t, srv, "GET", "/api/v1/dead-letters?reason=rejected&limit=1&before=3", "")
	items = body["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["id"] != float64(2) || body["next"] != nil {
		t.Fatalf("second page: %v", body)
	}
	_, body = call(t, srv, "GET", "/api/v1/dead-letters?queue=worker.w1.executions&replayed=false", "")
	if n := len(body["items"].([]any)); n != 1 || dl.lastFilter.Queue != "worker.w1.executions" || *dl.lastFilter.Replayed {
		t.Fatalf("queue filter: %d items, %+v", n, dl.lastFilter)
	}
	for _, q := range []string{"limit=0", "limit=x", "before=-1", "replayed=maybe"} {
		if code, body := call(t, srv, "GET", "/api/v1/dead-letters?"+q, ""); code != http.StatusBadRequest || body["error"] == nil {
			t.Fatalf("%s: %d %v", q, code, body)
		}
	}
}

func TestDeadLetterGetShowsPayloadByEncoding(t *testing.T) {
	srv, _ := deadLetterServer(t)
	for id, want := range map[int]string{1: "json", 2: "text", 3: "base64"} {
		code, body := call(t, srv, "GET", fmt.Sprintf("/api/v1/dead-letters/%d", id), "")
		if code != http.StatusOK || body["payload_encoding"] != want {
			t.Fatalf("%d: %d %v", id, code, body)
		}
	}
	_, body := call(t, srv, "GET", "/api/v1/dead-letters/1", "")
	if p := body["payload"].(map[string]any); p["execution_id"] != float64(7) || body["first_death_at"] != "2026-01-02T03:04:05.000000Z" {
		t.Fatalf("json payload and times: %v", body)
	}
	_, body = call(t, srv, "GET", "/api/v1/dead-letters/3", "")
	if body["payload"] != "/wE=" {
		t.Fatalf("base64 payload: %v", body["payload"])
	}
	if code, _ := call(t, srv, "GET", "/api/v1/dead-letters/99", ""); code != http.StatusNotFound {
		t.Fatalf("missing: %d", code)
	}
	if code, body := call(t, srv, "GET", "/api/v1/dead-letters/abc", ""); code != http.StatusBadRequest || body["error"] != "invalid dead letter id" {
		t.Fatalf("bad id: %d %v", code, body)
	}
}

func TestDeadLetterReplayOnceAndErrors(t *testing.T) {
	srv, _ := deadLetterServer(t)
	code, body := call(t, srv, "POST", "/api/v1/dead-letters/1/replay", "")
	if code != http.StatusOK || body["replay_execution_id"] != float64(501) || body["replayed_at"] == nil {
		t.Fatalf("replay: %d %v", code, body)
	}
	code, body = call(t, srv, "POST", "/api/v1/dead-letters/1/replay", "")
	if code != http.StatusConflict || body["error"] != "cannot replay dead letter" || body["details"] == nil {
		t.Fatalf("second replay: %d %v", code, body)
	}
	if code, body := call(t, srv, "POST", "/api/v1/dead-letters/4/replay", ""); code != http.StatusTooManyRequests {
		t.Fatalf("full queue: %d %v", code, body)
	}
	if code, _ := call(t, srv, "POST", "/api/v1/dead-letters/99/replay", ""); code != http.StatusNotFound {
		t.Fatalf("missing: %d", code)
	}
	code, body = call(t, srv, "POST", "/api/v1/dead-letters/2/replay", "")
	if code != http.StatusOK || body["replay_execution_id"] != nil {
		t.Fatalf("republish: %d %v", code, body)
	}
}

func TestDeadLetterDelete(t *testing.T) {
	srv, _ := deadLetterServer(t)
	if code, body := call(t, srv, "DELETE", "/api/v1/dead-letters/2", ""); code != http.StatusOK || body["deleted"] != float64(2) {
		t.Fatalf("delete: %d %v", code, body)
	}
	if code, _ := call(t, srv, "DELETE", "/api/v1/dead-letters/2", ""); code != http.StatusNotFound {
		t.Fatalf("delete again: %d", code)
	}
}

func TestDeadLetterBulk(t *testing.T) {
	srv, _ := deadLetterServer(t)
	code, body := call(t, srv, "POST", "/api/v1/dead-letters/replay", `{"ids": [1, 4, 99, 1]}`)
	if code != http.StatusOK || body["replayed"] != float64(1) || body["failed"] != float64(2) {
		t.Fatalf("bulk replay: %d %v", code, body)
	}
	statuses := map[float64]float64{}
	for _, it := range body["items"].([]any) {
		m := it.(map[string]any)
		st, _ := m["status"].(float64)
		statuses[m["id"].(float64)] = st
	}
	if fmt.Sprint(statuses) != fmt.Sprint(map[float64]float64{1: 0, 4: 429, 99: 404}) {
		t.Fatalf("per-record outcomes: %v", statuses)
	}
	// The filter form replays only records not replayed yet.
	code, body = call(t, srv, "POST", "/api/v1/dead-letters/replay", `{"reason": "expired"}`)
	if code != http.StatusOK || len(body["items"].([]any)) != 1 {
		t.Fatalf("filter replay: %d %v", code, body)
	}
	for _, bad := range []string{``, `{}`, `{"ids": [1], "reason": "x"}`, `{"ids": [0]}`, `{"reason": " "}`, `{"nope": 1}`} {
		if code, body := call(t, srv, "POST", "/api/v1/dead-letters/delete", bad); code != http.StatusBadRequest || body["error"] == nil {
			t.Fatalf("%q: %d %v", bad, code, body)
		}
	}
	code, body = call(t, srv, "POST", "/api/v1/dead-letters/delete", `{"queue": "attune.execution.requests.queue"}`)
	if code != http.StatusOK || fmt.Sprint(body["deleted"]) != "[2 3]" || fmt.Sprint(body["not_found"]) != "[]" {
		t.Fatalf("filter delete: %d %v", code, body)
	}
	code, body = call(t, srv, "POST", "/api/v1/dead-letters/delete", `{"ids": [1, 2]}`)
	if code != http.StatusOK || fmt.Sprint(body["deleted"]) != "[1]" || fmt.Sprint(body["not_found"]) != "[2]" {
		t.Fatalf("ids delete: %d %v", code, body)
	}
}

func TestDeadLettersNeedACapableReader(t *testing.T) {
	srv, _, _ := testServer(t)
	if code, body := call(t, srv, "GET", "/api/v1/dead-letters", ""); code != http.StatusNotImplemented || body["error"] == nil {
		t.Fatalf("%d %v", code, body)
	}
	if code, _ := callAuth(t, srv, "GET", "/api/v1/dead-letters", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("auth first: %d", code)
	}
}
