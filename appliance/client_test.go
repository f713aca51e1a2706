package appliance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestParseParams(t *testing.T) {
	got, err := parseParams([]string{"message=hi", "seconds=0.5", "n=3", "big=12345678901234567890", "ok=true",
		"none=null", "opts={\"a\":[1,2]}", "empty=", "code=\"007\"", "raw=007", "eq=a=b", "two=1 2", "word=true1"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	want := `{"big":12345678901234567890,"code":"007","empty":"","eq":"a=b","message":"hi","n":3,"none":null,` +
		`"ok":true,"opts":{"a":[1,2]},"raw":"007","seconds":0.5,"two":"1 2","word":"true1"}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	for _, bad := range [][]string{{"novalue"}, {"=x"}, {"a=1", "a=2"}} {
		if _, err := parseParams(bad); err == nil {
			t.Fatalf("%v: want an error", bad)
		}
	}
}

// hermetic clears the variables discover reads from the real environment.
func hermetic(t *testing.T) {
	t.Helper()
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	old := systemConfigPath
	systemConfigPath = filepath.Join(t.TempDir(), "absent.yaml")
	t.Cleanup(func() { systemConfigPath = old })
}

func writeToken(t *testing.T, dir, tok string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDiscover(t *testing.T) {
	hermetic(t)
	dir := t.TempDir()
	writeToken(t, dir, "file-token")

	// Flags win over everything.
	tg, err := discover(discoverOptions{Server: "example.com:9000/", Token: "flag", Environ: []string{EnvServer + "=http://env:1", EnvToken + "=env"}})
	if err != nil || tg.Server != "http://example.com:9000" || tg.Token != "flag" {
		t.Fatalf("flags: %+v %v", tg, err)
	}
	// Then the environment.
	tg, err = discover(discoverOptions{Environ: []string{EnvServer + "=https://env:1", EnvToken + "=env"}})
	if err != nil || tg.Server != "https://env:1" || tg.Token != "env" {
		t.Fatalf("env: %+v %v", tg, err)
	}
	// Then the local config: data dir from the flag, address from config env.
	tg, err = discover(discoverOptions{DataDir: dir, Environ: []string{"ATTUNE__HTTP__ADDR=0.0.0.0:9123"}})
	if err != nil || tg.Server != "http://127.0.0.1:9123" || tg.Token != "file-token" {
		t.Fatalf("local: %+v %v", tg, err)
	}
	// A config file naming the data dir.
	cfgPath := filepath.Join(t.TempDir(), "attune.yaml")
	if err := os.WriteFile(cfgPath, []byte("data_dir: "+dir+"\nhttp:\n  addr: \"[::]:8181\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg, err = discover(discoverOptions{ConfigPath: cfgPath})
	if err != nil || tg.Server != "http://[::1]:8181" || tg.Token != "file-token" {
		t.Fatalf("config file: %+v %v", tg, err)
	}
	// Default data dir without a token, packaged config present: use it.
	systemConfigPath = cfgPath
	tg, err = discover(discoverOptions{Environ: []string{}})
	if err != nil || tg.Token != "file-token" || tg.Server != "http://[::1]:8181" {
		t.Fatalf("system config fallback: %+v %v", tg, err)
	}
}

func TestDiscoverErrors(t *testing.T) {
	hermetic(t)
	empty := t.TempDir()
	_, err := discover(discoverOptions{DataDir: empty})
	if err == nil || !strings.Contains(err.Error(), "admin.token") || !strings.Contains(err.Error(), "--token") {
		t.Fatalf("missing token: %v", err)
	}
	writeToken(t, empty, "x")
	if _, err := discover(discoverOptions{DataDir: empty, Environ: []string{"ATTUNE__HTTP__ADDR=127.0.0.1:0"}}); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("port 0: %v", err)
	}
	if _, err := discover(discoverOptions{Server: "ftp://x", Token: "t"}); err == nil {
		t.Fatal("ftp server accepted")
	}
	if _, err := discover(discoverOptions{ConfigPath: filepath.Join(empty, "nope.yaml")}); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("missing config: %v", err)
	}
}

// fakeAPI answers like /api/v1 for one execution that fails after a poll.
func fakeAPI(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var polls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/executions", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"error":"invalid token"}`)
			return
		}
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if body["action_ref"] == "core.sleep" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid parameters","details":[{"field":"seconds","message":"must be a number"},{"field":"x","message":"unknown"}]}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":5,"action_ref":"core.local","status":"requested","created_at":"2026-01-02T03:04:05.000000Z"}`)
	})
	mux.HandleFunc("GET /api/v1/executions/5", func(w http.ResponseWriter, _ *http.Request) {
		if polls.Add(1) < 2 {
			fmt.Fprint(w, `{"id":5,"action_ref":"core.local","status":"running","created_at":"2026-01-02T03:04:05.000000Z"}`)
			return
		}
		fmt.Fprint(w, `{"id":5,"action_ref":"core.local","status":"failed","error":"exit code 3","exit_code":3,
			"result":{"ok":false},"stderr":"boom\n","created_at":"2026-01-02T03:04:05.000000Z"}`)
	})
	mux.HandleFunc("GET /api/v1/executions", func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Encode(); got != "action_ref=core.local&limit=2&status=running%2Cqueued" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"unexpected query %s"}`, got)
			return
		}
		fmt.Fprint(w, `{"items":[{"id":9,"action_ref":"core.local","status":"queued","queue_position":2,"created_at":"2026-01-02T03:04:05.000000Z"},
			{"id":8,"action_ref":"core.local","status":"running","worker":"w1","created_at":"2026-01-02T03:04:05.000000Z"}],"next":8}`)
	})
	mux.HandleFunc("POST /api/v1/executions/5/cancel", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprint(w, `{"error":"execution already finished","details":{"id":5,"status":"failed"}}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, &polls
}

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	root := NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestRunWait(t *testing.T) {
	srv, polls := fakeAPI(t)
	out, errOut, err := runCLI(t, "run", "core.local", "cmd=exit 3", "--wait", "--server", srv.URL, "--token", "tok")
	if err == nil || !strings.Contains(err.Error(), "execution 5 failed: exit code 3") {
		t.Fatalf("want a non-zero exit naming the failure, got %v", err)
	}
	for _, want := range []string{"Status:", "failed", "Exit code:", "Result:", `"ok": false`, "Stderr:", "boom"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "running") || polls.Load() < 2 {
		t.Fatalf("progress %q after %d polls", errOut, polls.Load())
	}
	out, _, err = runCLI(t, "run", "core.local", "--server", srv.URL, "--token", "tok", "--json")
	if err != nil || !strings.Contains(out, `"status": "requested"`) {
		t.Fatalf("json: %v\n%s", err, out)
	}
}

func TestRunErrors(t *testing.T) {
	srv, _ := fakeAPI(t)
	_, _, err := runCLI(t, "run", "core.sleep", "seconds=x", "--server", srv.URL, "--token", "tok")
	if err == nil || err.Error() != "invalid parameters:\n  seconds: must be a number\n  x: unknown" {
		t.Fatalf("validation: %v", err)
	}
	if _, _, err := runCLI(t, "run", "core.noop", "--server", srv.URL, "--token", "bad"); err == nil || err.Error() != "invalid token" {
		t.Fatalf("bad token: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, _, err = runCLI(t, "run", "core.noop", "--server", addr, "--token", "t")
	if err == nil || !strings.Contains(err.Error(), "cannot reach attune at http://"+addr+": is `attune serve` running?") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, _, err := runCLI(t, "executions", "get", "abc", "--server", srv.URL, "--token", "tok"); err == nil {
		t.Fatal("non-numeric id accepted")
	}
}

func TestExecutionsCommands(t *testing.T) {
	srv, _ := fakeAPI(t)
	conn := []string{"--server", srv.URL, "--token", "tok"}
	out, errOut, err := runCLI(t, append([]string{"executions", "list", "--status", "running,queued", "--action", "core.local", "--limit", "2"}, conn...)...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ID") || !strings.Contains(out, "queued (#2)") || !strings.Contains(out, "w1") || !strings.Contains(errOut, "--before 8") {
		t.Fatalf("table:\n%s\n%s", out, errOut)
	}
	out, _, err = runCLI(t, append([]string{"executions", "get", "5"}, conn...)...)
	if err != nil || !strings.Contains(out, "Execution:") {
		t.Fatalf("get: %v\n%s", err, out)
	}
	_, _, err = runCLI(t, append([]string{"executions", "cancel", "5"}, conn...)...)
	if err == nil || !strings.Contains(err.Error(), "execution already finished") || !strings.Contains(err.Error(), `"status":"failed"`) {
		t.Fatalf("cancel: %v", err)
	}
}
