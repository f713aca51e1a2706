package web

import (
	"net/http"
	"strings"
	"testing"
)

func TestActionsReadRoutes(t *testing.T) {
	srv, _, _ := testServer(t)
	code, body := call(t, srv, "GET", "/api/v1/actions", "")
	if code != http.StatusOK || len(body["items"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, body)
	}
	if code, body = call(t, srv, "GET", "/api/v1/actions/core.noop", ""); code != http.StatusOK || body["ref"] != "core.noop" {
		t.Fatalf("get: %d %v", code, body)
	}
	if !sixDigits.MatchString(body["created_at"].(string)) {
		t.Fatalf("created_at %v", body["created_at"])
	}
	if code, body = call(t, srv, "GET", "/api/v1/actions/core.noop/policy", ""); code != http.StatusOK || body["paused"] != true {
		t.Fatalf("policy: %d %v", code, body)
	}
	if code, body = call(t, srv, "GET", "/api/v1/actions/core.noop/queue-stats", ""); code != http.StatusOK || len(body["items"].([]any)) != 1 {
		t.Fatalf("queue-stats: %d %v", code, body)
	}
	if code, body = call(t, srv, "GET", "/api/v1/queues", ""); code != http.StatusOK || len(body["items"].([]any)) != 2 {
		t.Fatalf("queues: %d %v", code, body)
	}
	for _, p := range []string{"/api/v1/actions/nope.x", "/api/v1/actions/nope.x/policy", "/api/v1/actions/nope.x/queue-stats"} {
		if code, body := call(t, srv, "GET", p, ""); code != http.StatusNotFound {
			t.Fatalf("%s: %d %v", p, code, body)
		}
	}
}

func TestRegisterAction(t *testing.T) {
	srv, _, st := testServer(t)
	code, body := call(t, srv, "POST", "/api/v1/actions",
		`{"ref":"ops.hello","runtime":"builtin","entrypoint":"echo","policy":{"concurrency":{"limit":2}}}`)
	if code != http.StatusCreated || body["ref"] != "ops.hello" || body["pack"] != "ops" {
		t.Fatalf("register: %d %v", code, body)
	}
	if !st.packs["ops"] {
		t.Fatal("the missing pack was not created")
	}
	cases := []struct{ name, body, field string }{
		{"unknown field", `{"ref":"ops.a","runtime":"builtin","entrypoint":"noop","timout":3}`, "timout"},
		{"bad ref", `{"ref":"nodot","runtime":"builtin","entrypoint":"noop"}`, "ref"},
		{"bad runtime", `{"ref":"ops.a","runtime":"cobol"}`, "runtime"},
		{"bad limit", `{"ref":"ops.a","runtime":"builtin","entrypoint":"noop","policy":{"concurrency":{"limit":0}}}`, "policy.concurrency.limit"},
		{"huge window", `{"ref":"ops.a","runtime":"builtin","entrypoint":"noop","policy":{"rate_limit":{"max":1,"window":1e12}}}`, "policy.rate_limit.window"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "POST", "/api/v1/actions", c.body)
			if code != http.StatusBadRequest {
				t.Fatalf("status %d: %v", code, body)
			}
			if !hasField(body, c.field) {
				t.Fatalf("details %v, want field %q", body["details"], c.field)
			}
		})
	}
	for _, junk := range []string{``, `null`, `[]`, `"x"`, `{"ref":`, `{"ref":1}`} {
		if code, body := call(t, srv, "POST", "/api/v1/actions", junk); code != http.StatusBadRequest {
			t.Fatalf("%q: %d %v", junk, code, body)
		}
	}
}

func hasField(body map[string]any, field string) bool {
	details, _ := body["details"].([]any)
	for _, d := range details {
		if m, ok := d.(map[string]any); ok && m["field"] == field {
			return true
		}
	}
	return false
}

func TestPutPolicy(t *testing.T) {
	srv, _, st := testServer(t)
	code, body := call(t, srv, "PUT", "/api/v1/actions/core.noop/policy",
		`{"concurrency":{"limit":3,"group_by":["db"],"on_limit":"enqueue"},"max_queue_length":10,"queue_timeout":60,"rate_limit":{"max":5,"window":1.5}}`)
	if code != http.StatusOK {
		t.Fatalf("status %d %v", code, body)
	}
	p := st.actions["core.noop"].Policy
	if *p.Concurrency.Limit != 3 || *p.MaxQueueLength != 10 || *p.QueueTimeout != 60 || p.RateLimit.Window != 1.5 || !p.Paused {
		t.Fatalf("stored %+v (paused must be kept when left out)", p)
	}
	if code, _ := call(t, srv, "PUT", "/api/v1/actions/core.noop/policy", `{"paused":false}`); code != http.StatusOK || st.actions["core.noop"].Policy.Paused {
		t.Fatalf("paused:false not applied (%d)", code)
	}
	// What GET returns can be PUT back.
	_, got := call(t, srv, "GET", "/api/v1/actions/core.noop/policy", "")
	if code, body := call(t, srv, "PUT", "/api/v1/actions/core.noop/policy", mustJSON(t, got)); code != http.StatusOK {
		t.Fatalf("round trip: %d %v", code, body)
	}
	bad := []struct{ body, field string }{
		{`{"concurrency":{"limit":0}}`, "concurrency.limit"},
		{`{"concurrency":{"limit":-1}}`, "concurrency.limit"},
		{`{"concurrency":{"limit":1.5}}`, "concurrency.limit"},
		{`{"concurrency":{"limit":1,"on_limit":"drop"}}`, "concurrency.on_limit"},
		{`{"concurrency":{"group_by":[""]}}`, "concurrency.group_by.0"},
		{`{"max_queue_length":0}`, "max_queue_length"},
		{`{"max_queue_length":99999999999}`, "max_queue_length"},
		{`{"queue_timeout":0}`, "queue_timeout"},
		{`{"rate_limit":{"max":0,"window":1}}`, "rate_limit.max"},
		{`{"rate_limit":{"max":1,"window":0}}`, "rate_limit.window"},
		{`{"rate_limit":{"max":1}}`, "rate_limit.window"},
		{`{"limit":1}`, "limit"},
		{`{"paused":"yes"}`, "paused"},
	}
	for _, c := range bad {
		code, body := call(t, srv, "PUT", "/api/v1/actions/core.noop/policy", c.body)
		if code != http.StatusBadRequest || !hasField(body, c.field) {
			t.Fatalf("%s: %d %v, want 400 naming %q", c.body, code, body, c.field)
		}
	}
	for _, junk := range []string{``, `null`, `[]`, `1`, `{`} {
		if code, body := call(t, srv, "PUT", "/api/v1/actions/core.noop/policy", junk); code != http.StatusBadRequest {
			t.Fatalf("%q: %d %v", junk, code, body)
		}
	}
	if code, _ := call(t, srv, "PUT", "/api/v1/actions/nope.x/policy", `{}`); code != http.StatusNotFound {
		t.Fatalf("unknown action: %d", code)
	}
}

func TestPauseResume(t *testing.T) {
	srv, _, st := testServer(t)
	if code, body := call(t, srv, "POST", "/api/v1/actions/core.noop/resume", ""); code != http.StatusOK || body["paused"] != false {
		t.Fatalf("resume: %d %v", code, body)
	}
	if code, body := call(t, srv, "POST", "/api/v1/actions/core.noop/pause", ""); code != http.StatusOK || body["paused"] != true {
		t.Fatalf("pause: %d %v", code, body)
	}
	if !st.actions["core.noop"].Policy.Paused {
		t.Fatal("not paused")
	}
	if code, _ := call(t, srv, "POST", "/api/v1/actions/nope.x/pause", ""); code != http.StatusNotFound {
		t.Fatalf("unknown: %d", code)
	}
}

func TestWorkers(t *testing.T) {
	srv, _, st := testServer(t)
	code, body := call(t, srv, "GET", "/api/v1/workers", "")
	if code != http.StatusOK {
		t.Fatalf("%d %v", code, body)
	}
	w := body["items"].([]any)[0].(map[string]any)
	if age := w["heartbeat_age_seconds"].(float64); age < 1.5 || age > 60 {
		t.Fatalf("heartbeat_age_seconds %v", age)
	}
	for op, want := range map[string]string{"drain": "draining", "cordon": "cordoned", "uncordon": "active"} {
		code, body := call(t, srv, "POST", "/api/v1/workers/w1/"+op, "")
		if code != http.StatusOK || body["status"] != want || st.workers["w1"].Status != want {
			t.Fatalf("%s: %d %v", op, code, body)
		}
	}
	if code, _ := call(t, srv, "POST", "/api/v1/workers/nope/drain", ""); code != http.StatusNotFound {
		t.Fatalf("unknown worker: %d", code)
	}
}

// TestJunkNeverFails500 sends malformed input to every writing route.
func TestJunkNeverFails500(t *testing.T) {
	srv, _, _ := testServer(t)
	routes := []struct{ method, path string }{
		{"POST", "/api/v1/executions"}, {"POST", "/api/v1/actions"}, {"PUT", "/api/v1/actions/core.noop/policy"},
		{"POST", "/api/v1/executions/8/cancel"}, {"POST", "/api/v1/actions/core.noop/pause"}, {"POST", "/api/v1/workers/w1/drain"},
	}
	junk := []string{``, `null`, `0`, `""`, `[]`, `{}`, `{"a":`, "\x00\xff", `{"action_ref":null}`, `{"action_ref":{}}`,
		`{"concurrency":null}`, `{"concurrency":[]}`, `{"rate_limit":"x"}`, `{"parameters":null,"action_ref":"core.noop"}`,
		`{"ref":"a.b","runtime":"builtin","entrypoint":"noop","timeout":-1}`, `{"ref":"a.b","parameters":{"type":"nope"}}`,
		strings.Repeat("[", 10000)}
	for _, rt := range routes {
		for _, j := range junk {
			code, body := call(t, srv, rt.method, rt.path, j)
			if code >= 500 {
				t.Fatalf("%s %s %q: %d %v", rt.method, rt.path, j, code, body)
			}
		}
	}
}
