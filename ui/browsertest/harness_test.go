package browsertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/attune-io/attune/appliance"
	"github.com/attune-io/attune/appliance/config"
	"github.com/attune-io/attune/appliance/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one appliance and one browser tab.
type env struct {
	t       *testing.T
	app     *appliance.App
	base    string
	token   string
	amqpURL string
	tab     context.Context
	shots   string // where screenshots go
}

// chromiumPath finds Debian's chromium.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{os.Getenv("ATTUNE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("chromium is not installed (scripts/install-deps.sh installs it)")
	return ""
}

// start starts an appliance on a fresh database and vhost, and a headless
// browser with a 1280×900 window.
func start(t *testing.T) *env {
	t.Helper()
	browserPath := chromiumPath(t)
	e := &env{t: t, amqpURL: testenv.AMQPURL(t)}
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Database.URL = testenv.DatabaseURL(t)
	cfg.Broker.URL = e.amqpURL
	cfg.Worker.Capacity = 4
	cfg.Worker.HeartbeatIntervalSeconds = 2
	cfg.Worker.ShutdownTimeoutSeconds = 2
	cfg.Worker.KillGraceSeconds = 1
	// The engines run under Start's context: it lives as long as the test.
	ctx, cancel := context.WithCancel(context.Background())
	app, err := appliance.Start(ctx, cfg, testenv.Logger(t))
	if err != nil {
		cancel()
		t.Fatalf("start appliance: %v", err)
	}
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		app.Stop(stopCtx)
		cancel()
	})
	e.app, e.base = app, app.URL()
	tok, err := os.ReadFile(app.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	e.token = strings.TrimSpace(string(tok))

	e.shots = os.Getenv("ATTUNE_TEST_ARTIFACTS")
	if e.shots == "" {
		e.shots = t.TempDir()
	} else {
		e.shots = filepath.Join(e.shots, "screenshots")
	}
	if err := os.MkdirAll(e.shots, 0o755); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(tab); err != nil { // starts the browser, with no timeout
		t.Fatalf("start chromium: %v", err)
	}
	e.tab = tab
	return e
}

// do runs browser actions with a timeout, failing the test on error.
func (e *env) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		e.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		e.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to a dashboard path and waits for an element.
func (e *env) open(path, waitFor string) {
	e.t.Helper()
	e.do("open "+path, chromedp.Navigate(e.base+path), chromedp.WaitVisible(chromedp.CSS(waitFor)))
}

// until waits for a JavaScript expression to become truthy. A navigation
// (a form's redirect) interrupts a poll; it is retried on the new page.
func (e *env) until(what, expr string, timeout time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(e.tab, time.Until(deadline)+time.Second)
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline)),
			chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
			e.t.Fatalf("waiting for %s (%s): %v", what, expr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](e *env, expr string) T {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.tab, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		e.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// text returns the trimmed text of the first element matching a CSS
// selector ("" when there is none).
func (e *env) text(sel string) string {
	e.t.Helper()
	return eval[string](e, fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "").trim()`, sel))
}

// shot saves a full-page screenshot as <name>.png among the artifacts, and
// in docs/screenshots when ATTUNE_UPDATE_SCREENSHOTS=1 and keep is set.
func (e *env) shot(name string, keep ...bool) {
	ctx, cancel := context.WithTimeout(e.tab, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		e.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(e.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		e.t.Logf("screenshot %s: %v", name, err)
		return
	}
	e.t.Logf("screenshot: %s", path)
	if len(keep) > 0 && keep[0] && os.Getenv("ATTUNE_UPDATE_SCREENSHOTS") == "1" {
		_ = os.WriteFile(filepath.Join("..", "..", "docs", "screenshots", name+".png"), png, 0o644)
	}
}

// api calls the JSON API with the admin token.
func (e *env) api(method, path string, body any) (int, map[string]any) {
	e.t.Helper()
	code, out, err := e.tryAPI(method, path, body)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

// tryAPI calls the JSON API; safe to use from any goroutine.
func (e *env) tryAPI(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.base+"/api/v1"+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out, nil
}

// run requests an execution and returns its id.
func (e *env) run(action string, params map[string]any) int64 {
	e.t.Helper()
	code, out := e.api("POST", "/executions", map[string]any{"action_ref": action, "parameters": params})
	if code != http.StatusCreated {
		e.t.Fatalf("run %s: %d %v", action, code, out)
	}
	return int64(out["id"].(float64))
}

// status reads an execution's status through the API.
func (e *env) status(id int64) string {
	e.t.Helper()
	_, out := e.api("GET", fmt.Sprintf("/executions/%d", id), nil)
	s, _ := out["status"].(string)
	return s
}

// waitStatus waits until an execution reaches a status (API view).
func (e *env) waitStatus(id int64, want string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.status(id) != want {
		if time.Now().After(deadline) {
			e.t.Fatalf("execution %d: %s, want %s", id, e.status(id), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// markPage sets a marker on the window: it survives live updates and
// vanishes on any reload or navigation.
func (e *env) markPage() {
	e.t.Helper()
	eval[chromedp.Void](e, `window.__noReload = 1`)
}

// samePage fails when the page was reloaded since markPage.
func (e *env) samePage(what string) {
	e.t.Helper()
	if !eval[bool](e, `window.__noReload === 1`) {
		e.t.Fatalf("%s: the page was reloaded", what)
	}
}

// waitLive waits until the page's SSE stream is connected.
func (e *env) waitLive() {
	e.t.Helper()
	e.until("the live feed", `document.querySelector('[data-testid=live-status]')?.dataset.state === 'on'`, 10*time.Second)
}
