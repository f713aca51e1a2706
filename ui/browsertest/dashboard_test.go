package browsertest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/attune-io/attune/appliance/testenv"
	"github.com/attune-io/attune/broker"
)

// TestDashboard walks an operator through the dashboard of a real
// appliance: log in, open every page, watch new executions appear without
// a reload, cancel one, pause and resume a queue, cordon a worker, replay a
// dead letter, check the phone layout and log out.
func TestDashboard(t *testing.T) {
	e := start(t)

	// One slot for core.sleep: the first run holds it, the next ones queue.
	if code, out := e.api("PUT", "/actions/core.sleep/policy", map[string]any{"concurrency": map[string]any{"limit": 1}}); code != 200 {
		t.Fatalf("set policy: %d %v", code, out)
	}
	holder := e.run("core.sleep", map[string]any{"seconds": 60})
	e.waitStatus(holder, "running")
	waiting := e.run("core.sleep", map[string]any{"seconds": 1})
	e.waitStatus(waiting, "queued")
	done := e.run("core.echo", map[string]any{"message": "hello from the API"})
	e.waitStatus(done, "succeeded")

	t.Run("login", func(t *testing.T) {
		e.t = t
		e.open("/executions", "[data-testid=login-form]")
		e.shot("login")
		e.do("log in",
			chromedp.SendKeys(chromedp.CSS("[data-testid=login-token]"), "not the token"),
			chromedp.Click(chromedp.CSS("[data-testid=login-submit]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=login-error]")),
			chromedp.SendKeys(chromedp.CSS("[data-testid=login-token]"), e.token),
			chromedp.Click(chromedp.CSS("[data-testid=login-submit]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=execution-table]")), // back where it was going
		)
	})

	t.Run("every page opens", func(t *testing.T) {
		e.t = t
		for _, p := range []struct{ path, wait, shot string }{
			{"/", "[data-testid=overview]", "overview"},
			{"/queues", "[data-testid=queue-card]", "queues"},
			{"/executions", "[data-testid=execution-row]", "executions"},
			{fmt.Sprintf("/executions/%d", waiting), "[data-testid=queue-position]", "execution-queued"},
			{fmt.Sprintf("/executions/%d", done), "[data-testid=timeline-entry]", "execution"},
			{"/workers", "[data-testid=worker-row]", "workers"},
			{"/dead-letters", "[data-testid=dead-letters-empty]", "dead-letters-empty"},
		} {
			e.open(p.path, p.wait)
			e.shot(p.shot, p.shot == "queues" || p.shot == "execution")
		}
		if got := e.text("[data-testid=queue-position]"); got != "" {
			t.Errorf("queue position shown on a finished execution: %q", got)
		}
		e.open(fmt.Sprintf("/executions/%d", waiting), "[data-testid=queue-position]")
		if got := e.text("[data-testid=queue-position]"); got != "1" {
			t.Errorf("queue position %q, want 1", got)
		}
	})

	var queued int64
	t.Run("new executions appear without a reload", func(t *testing.T) {
		e.t = t
		e.open("/executions", "[data-testid=execution-row]")
		e.waitLive()
		e.markPage()
		id := e.run("core.echo", map[string]any{"message": "live"})
		e.until("the new row", fmt.Sprintf(`!!document.querySelector('[data-testid=execution-row][data-id="%d"]')`, id), 10*time.Second)
		e.until("its final status", fmt.Sprintf(`!!document.querySelector('[data-testid=execution-row][data-id="%d"][data-status=succeeded]')`, id), 10*time.Second)
		e.samePage("executions")
		e.shot("executions-live", true)

		e.open("/queues", "[data-testid=queue-card]")
		e.waitLive()
		e.markPage()
		sel := `[data-testid=queue-row][data-ref="core.sleep"] [data-testid=queue-length]`
		if got := e.text(sel); got != "1" {
			t.Fatalf("core.sleep queue length %q, want 1", got)
		}
		queued = e.run("core.sleep", map[string]any{"seconds": 1})
		e.until("the queue to grow", fmt.Sprintf(`document.querySelector(%q)?.textContent.trim() === "2"`, sel), 10*time.Second)
		e.samePage("queues")
		t.Logf("live refreshes on this page: %v", eval[int](e, `window.attuneLive.refreshes`))
	})

	t.Run("cancel", func(t *testing.T) {
		e.t = t
		e.open(fmt.Sprintf("/executions/%d", queued), "[data-testid=cancel]")
		e.do("cancel", chromedp.Click(chromedp.CSS("[data-testid=cancel]")))
		e.until("the cancel's flash", `document.querySelector('[data-testid=flash]')?.textContent.includes('is cancelled')`, 10*time.Second)
		e.until("the cancelled badge", `!!document.querySelector('[data-testid=execution-status] [data-status=cancelled]')`, 10*time.Second)
		if got := e.status(queued); got != "cancelled" {
			t.Fatalf("API says %s", got)
		}
		if n := eval[int](e, `document.querySelectorAll('[data-testid=cancel]').length`); n != 0 {
			t.Error("a cancelled execution still offers cancel")
		}
	})

	t.Run("pause and resume a queue", func(t *testing.T) {
		e.t = t
		card := `[data-testid=queue-card][data-ref="core.echo"]`
		e.open("/queues", card)
		e.do("pause", chromedp.Click(chromedp.CSS(card+" [data-testid=pause]")),
			chromedp.WaitVisible(chromedp.CSS(card+" [data-testid=resume]")))
		if _, out := e.api("GET", "/actions/core.echo", nil); !paused(out) {
			t.Fatalf("not paused: %v", out["policy"])
		}
		e.shot("queues-paused")
		held := e.run("core.echo", map[string]any{"message": "waits for resume"})
		e.waitStatus(held, "queued")
		e.do("resume", chromedp.Click(chromedp.CSS(card+" [data-testid=resume]")),
			chromedp.WaitVisible(chromedp.CSS(card+" [data-testid=pause]")))
		e.waitStatus(held, "succeeded")

		e.do("set limit",
			chromedp.SendKeys(chromedp.CSS(card+" [data-testid=limit-input]"), "3"),
			chromedp.Click(chromedp.CSS(card+" [data-testid=limit-submit]")))
		e.until("the limit's flash", `document.querySelector('[data-testid=flash]')?.textContent.includes('Limit of core.echo set to 3')`, 10*time.Second)
		if _, out := e.api("GET", "/actions/core.echo", nil); limitOf(out) != 3 {
			t.Errorf("limit %v", out["policy"])
		}
	})

	t.Run("cordon and uncordon a worker", func(t *testing.T) {
		e.t = t
		e.open("/workers", "[data-testid=worker-row] [data-testid=cordon]")
		e.do("cordon", chromedp.Click(chromedp.CSS("[data-testid=worker-row] [data-testid=cordon]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=worker-row][data-status=cordoned] [data-testid=uncordon]")))
		e.do("uncordon", chromedp.Click(chromedp.CSS("[data-testid=worker-row] [data-testid=uncordon]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=worker-row][data-status=active] [data-testid=cordon]")))
	})

	t.Run("replay a dead letter", func(t *testing.T) {
		e.t = t
		e.open("/dead-letters", "[data-testid=dead-letters-empty]")
		e.waitLive()
		e.markPage()
		// A message the executor rejects as poison: it is dead-lettered and
		// recorded with the (cancelled) execution named in its body.
		publishPoison(t, e.amqpURL, queued)
		e.until("the dead letter to appear", `!!document.querySelector('[data-testid=dead-letter-row]')`, 15*time.Second)
		e.samePage("dead letters")
		e.do("show payload", chromedp.Click(chromedp.CSS("[data-testid=payload-toggle]")))
		e.shot("dead-letters", true)
		e.do("replay", chromedp.Click(chromedp.CSS("[data-testid=dead-letter-row] [data-testid=replay]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=replayed-as]")))
		if flash := e.text("[data-testid=flash]"); !strings.Contains(flash, "Replayed #") {
			t.Fatalf("flash %q", flash)
		}
		replay := eval[string](e, `document.querySelector('[data-testid=replayed-as]').textContent.replace('#', '')`)
		id, err := strconv.ParseInt(replay, 10, 64)
		if err != nil {
			t.Fatalf("replayed-as %q", replay)
		}
		_, out := e.api("GET", fmt.Sprintf("/executions/%d", id), nil)
		if rof, _ := out["retry_of"].(float64); int64(rof) != queued {
			t.Errorf("replay %d: retry_of %v, want %d", id, out["retry_of"], queued)
		}
	})

	t.Run("phone width", func(t *testing.T) {
		e.t = t
		e.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		for _, p := range []struct{ path, wait, shot string }{
			{"/", "[data-testid=overview]", "phone-overview"},
			{"/executions", "[data-testid=execution-row]", "phone-executions"},
			{"/queues", "[data-testid=queue-card]", "phone-queues"},
		} {
			e.open(p.path, p.wait)
			if w := eval[int](e, `document.documentElement.scrollWidth`); w > 390 {
				t.Errorf("%s scrolls sideways at phone width: %dpx", p.path, w)
			}
			e.shot(p.shot, p.shot == "phone-overview")
		}
		e.do("desktop viewport", chromedp.EmulateViewport(1280, 900))
	})

	t.Run("burst", func(t *testing.T) { burst(t, e) })

	t.Run("logout", func(t *testing.T) {
		e.t = t
		e.open("/", "[data-testid=logout]")
		e.do("log out", chromedp.Click(chromedp.CSS("[data-testid=logout]")),
			chromedp.WaitVisible(chromedp.CSS("[data-testid=login-info]")))
		e.open("/queues", "[data-testid=login-form]")
	})
}

// burst requests many executions while /executions is open and reports
// how many events and refreshes the browser saw.
func burst(t *testing.T, e *env) {
	e.t = t
	const n = 2000
	e.open("/executions", "[data-testid=execution-row]")
	e.waitLive()
	e.markPage()
	ev0 := eval[int](e, `window.attuneLive.events`)
	rf0 := eval[int](e, `window.attuneLive.refreshes`)
	start := time.Now()
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := w; i < n; i += 8 {
				if code, out, err := e.tryAPI("POST", "/executions", map[string]any{"action_ref": "core.noop"}); err != nil || code != 201 {
					errs <- fmt.Errorf("run %d: %d %v %v", i, code, out, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	requested := time.Since(start)
	e.until("the list to show the last run", `document.querySelectorAll('[data-testid=execution-row][data-status=succeeded]').length >= 50`, 2*time.Minute)
	elapsed := time.Since(start)
	time.Sleep(time.Second)
	events := eval[int](e, `window.attuneLive.events`) - ev0
	refreshes := eval[int](e, `window.attuneLive.refreshes`) - rf0
	e.samePage("burst")
	t.Logf("burst of %d executions requested in %v, list settled after %v: the browser got %d SSE events and did %d partial refreshes (%.1f/s)",
		n, requested.Round(time.Millisecond), elapsed.Round(time.Millisecond), events, refreshes, float64(refreshes)/elapsed.Seconds())
	if limit := int(elapsed/(500*time.Millisecond)) + 4; events > limit {
		t.Errorf("%d events in %v: not coalesced (limit %d)", events, elapsed, limit)
	}
	e.open("/", "[data-testid=throughput]")
	e.shot("overview-after-burst", true)
}

func publishPoison(t *testing.T, amqpURL string, executionID int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := broker.Dial(ctx, amqpURL, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pub := broker.NewPublisher(conn)
	defer pub.Close()
	body := fmt.Sprintf(`{"execution_id": %d}`, executionID)
	if err := pub.Publish(ctx, broker.ExchangeExecutions, broker.KeyExecutionRequested,
		broker.Message{Type: "bogus.type", Body: []byte(body), Mandatory: true}); err != nil {
		t.Fatal(err)
	}
}

func paused(action map[string]any) bool {
	p, _ := action["policy"].(map[string]any)
	v, _ := p["paused"].(bool)
	return v
}

func limitOf(action map[string]any) int {
	p, _ := action["policy"].(map[string]any)
	c, _ := p["concurrency"].(map[string]any)
	v, _ := c["limit"].(float64)
	return int(v)
}
