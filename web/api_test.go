package web

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func TestAuth(t *testing.T) {
	srv, _, _ := testServer(t)
	cases := []struct {
		name, path, auth string
		want             int
	}{
		{"no header", "/api/v1/executions", "", http.StatusUnauthorized},
		{"basic scheme", "/api/v1/executions", "Basic " + testToken, http.StatusUnauthorized},
		{"empty bearer", "/api/v1/executions", "Bearer ", http.StatusUnauthorized},
		{"wrong token", "/api/v1/executions", "Bearer nope", http.StatusForbidden},
		{"token prefix", "/api/v1/executions", "Bearer " + testToken[:5], http.StatusForbidden},
		{"right token", "/api/v1/executions", "Bearer " + testToken, http.StatusOK},
		{"scheme case", "/api/v1/executions", "bearer " + testToken, http.StatusOK},
		{"unknown path needs auth", "/api/v1/nothing", "", http.StatusUnauthorized},
		{"unknown path", "/api/v1/nothing", "Bearer " + testToken, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := callAuth(t, srv, "GET", c.path, "", c.auth)
			if code != c.want {
				t.Fatalf("status %d, want %d: %v", code, c.want, body)
			}
			if code >= 400 && body["error"] == nil {
				t.Fatalf("error body without \"error\": %v", body)
			}
		})
	}
	if code, _ := callAuth(t, srv, "GET", "/healthz", "", ""); code != http.StatusOK {
		t.Fatalf("/healthz must not need a token, got %d", code)
	}
}

func TestEmptyConfiguredTokenRefusesAll(t *testing.T) {
	eng, st := newFakes()
	srv := httptest.NewServer(NewRouter(Deps{Engine: eng, Reader: st}))
	defer srv.Close()
	if code, _ := callAuth(t, srv, "GET", "/api/v1/executions", "", "Bearer x"); code != http.StatusForbidden {
		t.Fatalf("status %d, want 403", code)
	}
}

func TestAPIRoleDisabled(t *testing.T) {
	srv := httptest.NewServer(NewRouter(Deps{Token: testToken}))
	defer srv.Close()
	code, body := call(t, srv, "GET", "/api/v1/executions", "")
	if code != http.StatusServiceUnavailable || body["error"] != "api role not enabled" {
		t.Fatalf("got %d %v", code, body)
	}
	if code, _ := callAuth(t, srv, "GET", "/api/v1/executions", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("auth comes first, got %d", code)
	}
}

var sixDigits = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`)

func TestCreateExecution(t *testing.T) {
	srv, eng, _ := testServer(t)
	code, body := call(t, srv, "POST", "/api/v1/executions", `{"action_ref":"core.noop","parameters":{"n":1},"timeout":2.5}`)
	if code != http.StatusCreated {
		t.Fatalf("status %d: %v", code, body)
	}
	if body["id"] != float64(42) || body["status"] != "requested" || body["action_ref"] != "core.noop" {
		t.Fatalf("body %v", body)
	}
	if ts, _ := body["created_at"].(string); ts != "2026-01-02T03:04:05.120000Z" {
		t.Fatalf("created_at %q, want six fractional digits", ts)
	}
	if len(eng.requests) != 1 || *eng.requests[0].TimeoutSeconds != 2.5 {
		t.Fatalf("requests %+v", eng.requests)
	}
}

func TestCreateExecutionErrors(t *testing.T) {
	srv, _, _ := testServer(t)
	cases := []struct {
		name, body string
		want       int
		field      string
	}{
		{"unknown action", `{"action_ref":"nope.x"}`, http.StatusNotFound, ""},
		{"invalid parameter", `{"action_ref":"core.sleep","parameters":{"seconds":"x"}}`, http.StatusBadRequest, "seconds"},
		{"queue full", `{"action_ref":"core.full"}`, http.StatusTooManyRequests, ""},
		{"missing ref", `{"parameters":{}}`, http.StatusBadRequest, "action_ref"},
		{"unknown field", `{"action_ref":"core.noop","params":{}}`, http.StatusBadRequest, "params"},
		{"parameters not object", `{"action_ref":"core.noop","parameters":[1]}`, http.StatusBadRequest, "parameters"},
		{"timeout not number", `{"action_ref":"core.noop","timeout":"10"}`, http.StatusBadRequest, "timeout"},
		{"not JSON", `{"action_ref":`, http.StatusBadRequest, ""},
		{"empty", ``, http.StatusBadRequest, ""},
		{"array", `[]`, http.StatusBadRequest, ""},
		{"two values", `{"action_ref":"core.noop"} {}`, http.StatusBadRequest, ""},
		{"too large", `{"action_ref":"core.noop","parameters":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, http.StatusRequestEntityTooLarge, ""},
		{"internal", `{"action_ref":"core.boom"}`, http.StatusInternalServerError, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, srv, "POST", "/api/v1/executions", c.body)
			if code != c.want {
				t.Fatalf("status %d, want %d: %v", code, c.want, body)
			}
			if _, ok := body["error"].(string); !ok {
				t.Fatalf("no error message: %v", body)
			}
			if c.field != "" {
				details, _ := body["details"].([]any)
				if len(details) == 0 || details[0].(map[string]any)["field"] != c.field {
					t.Fatalf("details %v, want field %q", body["details"], c.field)
				}
			}
			if code == http.StatusInternalServerError && strings.Contains(body["details"].(string), "10.0.0.1") {
				t.Fatalf("internal error leaked: %v", body)
			}
		})
	}
}

func TestListExecutions(t *testing.T) {
	srv, _, st := testServer(t)
	code, body := call(t, srv, "GET", "/api/v1/executions?status=queued,succeeded&status=queued&action_ref=core.noop&limit=2&before=99", "")
	if code != http.StatusOK || body["next"] != nil {
		t.Fatalf("got %d %v", code, body)
	}
	f := st.lastFilter
	if len(f.Statuses) != 2 || f.ActionRef != "core.noop" || f.Limit != 2 || f.Before != 99 {
		t.Fatalf("filter %+v", f)
	}
	items := body["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("items %v", items)
	}
	if ts := items[0].(map[string]any)["created_at"].(string); ts != "2026-01-02T03:04:05.000123Z" {
		t.Fatalf("created_at %q", ts)
	}
	st.next = 8
	if _, body := call(t, srv, "GET", "/api/v1/executions", ""); body["next"] != float64(8) {
		t.Fatalf("next %v", body["next"])
	}
	if _, body := call(t, srv, "GET", "/api/v1/executions?action_ref=none", ""); body["items"] == nil {
		t.Fatalf("empty list must be [], got %v", body)
	}
	for _, q := range []string{"status=bogus", "limit=0", "limit=abc", "limit=5000", "before=-1", "before=x"} {
		code, body := call(t, srv, "GET", "/api/v1/executions?"+q, "")
		if code != http.StatusBadRequest {
			t.Fatalf("%s: status %d %v", q, code, body)
		}
	}
	_, body = call(t, srv, "GET", "/api/v1/executions?status=bogus", "")
	if valid := body["details"].(map[string]any)["valid"].([]any); len(valid) != 11 {
		t.Fatalf("valid statuses %v", valid)
	}
}

func TestGetAndCancelExecution(t *testing.T) {
	srv, _, st := testServer(t)
	code, body := call(t, srv, "GET", "/api/v1/executions/7", "")
	if code != http.StatusOK || len(body["timeline"].([]any)) != 1 {
		t.Fatalf("got %d %v", code, body)
	}
	for _, k := range []string{"created_at", "finished_at"} {
		if !sixDigits.MatchString(body[k].(string)) {
			t.Fatalf("%s = %v", k, body[k])
		}
	}
	if at := body["timeline"].([]any)[0].(map[string]any)["at"].(string); !sixDigits.MatchString(at) {
		t.Fatalf("timeline at %q", at)
	}
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/api/v1/executions/abc", http.StatusBadRequest},
		{"GET", "/api/v1/executions/0", http.StatusBadRequest},
		{"GET", "/api/v1/executions/99999999999999999999", http.StatusBadRequest},
		{"GET", "/api/v1/executions/5", http.StatusNotFound},
		{"POST", "/api/v1/executions/5/cancel", http.StatusNotFound},
		{"POST", "/api/v1/executions/x/cancel", http.StatusBadRequest},
		{"POST", "/api/v1/executions/7/cancel", http.StatusConflict},
		{"POST", "/api/v1/executions/8/cancel", http.StatusOK},
		{"DELETE", "/api/v1/executions/8", http.StatusMethodNotAllowed},
	} {
		if code, body := call(t, srv, c.method, c.path, ""); code != c.want {
			t.Fatalf("%s %s: %d, want %d: %v", c.method, c.path, code, c.want, body)
		}
	}
	if st.execs[8].Status != "cancelled" {
		t.Fatal("execution 8 not cancelled")
	}
	_, body = call(t, srv, "POST", "/api/v1/executions/7/cancel", "")
	if body["details"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("409 should name the status: %v", body)
	}
	st.failWith = errTest
	if code, _ := call(t, srv, "GET", "/api/v1/executions/7", ""); code != http.StatusInternalServerError {
		t.Fatalf("store failure: %d", code)
	}
}

type testErr struct{}

func (testErr) Error() string { return "boom" }

var errTest = testErr{}
