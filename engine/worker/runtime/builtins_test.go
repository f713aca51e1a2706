package runtime

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runBuiltinReq(ctx context.Context, name string, params map[string]any) Outcome {
	return NewRunner().Run(ctx, Request{ActionRef: "core." + name, Runtime: Builtin, Entrypoint: name, Parameters: params})
}

func TestNoopAndEcho(t *testing.T) {
	t.Parallel()
	out := runBuiltinReq(context.Background(), "noop", map[string]any{"ignored": 1})
	assert.Equal(t, Succeeded, out.Status)
	assert.Equal(t, "{}", string(out.Result))
	assert.Nil(t, out.ExitCode)

	for _, entry := range []string{"echo", "core.echo"} {
		out = NewRunner().Run(context.Background(), Request{Runtime: Builtin, Entrypoint: entry,
			Parameters: map[string]any{"message": "hi <there>"}})
		assert.Equal(t, Succeeded, out.Status, entry)
		assert.JSONEq(t, `{"message":"hi <there>"}`, string(out.Result), entry)
	}
	// No entrypoint: the action ref names the builtin.
	out = NewRunner().Run(context.Background(), Request{Runtime: Builtin, ActionRef: "core.echo",
		Parameters: map[string]any{"message": ""}})
	assert.Equal(t, Succeeded, out.Status)

	out = runBuiltinReq(context.Background(), "echo", nil)
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, `parameter "message" is required`, out.Error)
	out = runBuiltinReq(context.Background(), "echo", map[string]any{"message": 5.0})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "must be a string")

	out = runBuiltinReq(context.Background(), "teleport", nil)
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, `unknown builtin "teleport"`, out.Error)
}

func TestSleep(t *testing.T) {
	t.Parallel()
	out := runBuiltinReq(context.Background(), "sleep", map[string]any{"seconds": 0.05})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.JSONEq(t, `{"slept":0.05}`, string(out.Result))
	assert.GreaterOrEqual(t, out.Duration, 50*time.Millisecond)

	out = runBuiltinReq(context.Background(), "sleep", map[string]any{"seconds": json.Number("0")})
	assert.Equal(t, Succeeded, out.Status, out.Error)

	for _, bad := range []any{-1.0, "3", nil} {
		out = runBuiltinReq(context.Background(), "sleep", map[string]any{"seconds": bad})
		assert.Equal(t, Failed, out.Status, "%v", bad)
	}
	out = runBuiltinReq(context.Background(), "sleep", map[string]any{"seconds": 1e300})
	assert.Equal(t, Failed, out.Status)

	out = NewRunner().Run(context.Background(), Request{Runtime: Builtin, Entrypoint: "sleep",
		Timeout: 100 * time.Millisecond, Parameters: map[string]any{"seconds": 30}})
	assert.Equal(t, TimedOut, out.Status)
	assert.Equal(t, "timed out after 100ms", out.Error)
	assert.Less(t, out.Duration, 2*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome, 1)
	go func() { done <- runBuiltinReq(ctx, "sleep", map[string]any{"seconds": 30}) }()
	cancel()
	select {
	case out = <-done:
		assert.Equal(t, Cancelled, out.Status)
		assert.Equal(t, "cancelled", out.Error)
	case <-time.After(5 * time.Second):
		t.Fatal("sleep ignored cancellation")
	}
}

func TestLocal(t *testing.T) {
	t.Parallel()
	out := runBuiltinReq(context.Background(), "local", map[string]any{"cmd": `echo "{\"n\": $ATTUNE_PARAM_N}"`, "n": 4})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.JSONEq(t, `{"n":4}`, string(out.Result))
	require.NotNil(t, out.ExitCode)

	out = runBuiltinReq(context.Background(), "core.local", map[string]any{"cmd": "echo plain; echo err >&2; exit 2"})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, "exit code 2", out.Error)
	assert.Equal(t, `"plain"`, string(out.Result))
	assert.Equal(t, "err\n", out.Stderr)

	out = runBuiltinReq(context.Background(), "local", map[string]any{})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, `parameter "cmd" is required`, out.Error)

	out = NewRunner().Run(context.Background(), Request{Runtime: Builtin, Entrypoint: "local",
		Timeout: 200 * time.Millisecond, KillGrace: 200 * time.Millisecond,
		Parameters: map[string]any{"cmd": "sleep 30 & echo $!; wait"}})
	assert.Equal(t, TimedOut, out.Status)
	requireGone(t, pidFromStdout(t, out.Stdout))
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Add("X-Multi", "a")
			w.Header().Add("X-Multi", "b")
			_, _ = io.WriteString(w, `{"ok": true}`)
		case "/echo":
			b, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, r.Method+" "+r.Header.Get("X-Token")+" "+r.Host+" "+string(b))
		case "/slow":
			select {
			case <-time.After(10 * time.Second):
			case <-r.Context().Done():
			}
		default:
			http.Error(w, "nope", http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	out := runBuiltinReq(ctx, "http_request", map[string]any{"url": srv.URL + "/json"})
	require.Equal(t, Succeeded, out.Status, out.Error)
	var res struct {
		StatusCode int               `json:"status_code"`
		Headers    map[string]string `json:"headers"`
		Body       string            `json:"body"`
		JSON       json.RawMessage   `json:"json"`
	}
	require.NoError(t, json.Unmarshal(out.Result, &res))
	assert.Equal(t, 200, res.StatusCode)
	assert.Equal(t, "application/json", res.Headers["Content-Type"])
	assert.Equal(t, "a, b", res.Headers["X-Multi"])
	assert.Equal(t, `{"ok": true}`, res.Body)
	assert.JSONEq(t, `{"ok":true}`, string(res.JSON))

	out = runBuiltinReq(ctx, "http_request", map[string]any{"url": srv.URL + "/echo", "method": "post",
		"headers": map[string]any{"X-Token": "t1", "Host": "example.test"}, "body": "payload"})
	require.Equal(t, Succeeded, out.Status, out.Error)
	res.JSON = nil
	require.NoError(t, json.Unmarshal(out.Result, &res))
	assert.Equal(t, "POST t1 example.test payload", res.Body)
	assert.Nil(t, res.JSON, "a non-JSON body has no json field")

	// 404 is still a success: the caller decides what a status means.
	out = runBuiltinReq(ctx, "http_request", map[string]any{"url": srv.URL + "/missing"})
	require.Equal(t, Succeeded, out.Status, out.Error)
	require.NoError(t, json.Unmarshal(out.Result, &res))
	assert.Equal(t, 404, res.StatusCode)

	out = NewRunner().Run(ctx, Request{Runtime: Builtin, Entrypoint: "http_request", OutputLimit: 4,
		Parameters: map[string]any{"url": srv.URL + "/json"}})
	require.Equal(t, Succeeded, out.Status, out.Error)
	assert.Contains(t, string(out.Result), `"body":"{\"ok","body_truncated":true`)

	out = runBuiltinReq(ctx, "http_request", map[string]any{"url": srv.URL + "/slow", "timeout": 0.2})
	assert.Equal(t, Failed, out.Status)
	assert.Equal(t, "request timed out after 200ms", out.Error)

	out = NewRunner().Run(ctx, Request{Runtime: Builtin, Entrypoint: "http_request", Timeout: 200 * time.Millisecond,
		Parameters: map[string]any{"url": srv.URL + "/slow"}})
	assert.Equal(t, TimedOut, out.Status)
}

func TestHTTPRequestErrors(t *testing.T) {
	t.Parallel()
	// A port that was just free: connecting is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	out := runBuiltinReq(context.Background(), "http_request", map[string]any{"url": "http://" + addr + "/"})
	assert.Equal(t, Failed, out.Status)
	assert.Contains(t, out.Error, "request failed")

	for _, params := range []map[string]any{
		{},
		{"url": "ftp://example.com/"},
		{"url": "/relative"},
		{"url": "http://x/", "method": "BREW"},
		{"url": "http://x/", "headers": map[string]any{"a": 1.0}},
		{"url": "http://x/", "headers": "a: b"},
		{"url": "http://x/", "timeout": 0.0},
		{"url": "http://x/", "body": 3.0},
	} {
		out = runBuiltinReq(context.Background(), "http_request", params)
		assert.Equal(t, Failed, out.Status, "%v", params)
		assert.NotEmpty(t, out.Error)
	}
}

func TestBuiltinsSpecs(t *testing.T) {
	specs := Builtins()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		assert.NotEmpty(t, s.Description, s.Name)
		var schema struct {
			Schema     string                     `json:"$schema"`
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		require.NoError(t, json.Unmarshal(s.Parameters, &schema), s.Name)
		assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", schema.Schema)
		assert.Equal(t, "object", schema.Type)
		for _, req := range schema.Required {
			assert.Contains(t, schema.Properties, req, s.Name)
		}
		_, ok := lookupBuiltin("core." + s.Name)
		assert.True(t, ok)
	}
	assert.Equal(t, []string{"echo", "http_request", "local", "noop", "sleep"}, names)
	assert.True(t, slices.IsSorted(names))

	httpSchema := string(specs[1].Parameters)
	assert.True(t, strings.Contains(httpSchema, `"default": "GET"`) && strings.Contains(httpSchema, `"default": 30`))

	// Callers get copies: mutating them does not change the table.
	specs[0].Parameters[0] = 'X'
	assert.Equal(t, byte('{'), Builtins()[0].Parameters[0])
}
