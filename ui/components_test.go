package ui

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestStatusBadgeShowsStatusAndTone(t *testing.T) {
	for status, tone := range map[string]string{"failed": "t-bad", "succeeded": "t-ok", "queued": "t-warn", "running": "t-busy", "cancelled": "t-idle"} {
		d := render(t, StatusBadge(status))
		b := d.one("status")
		if attr(b, "data-status") != status || text(b) != status {
			t.Errorf("%s: badge %q / %q", status, attr(b, "data-status"), text(b))
		}
		if !strings.Contains(attr(b, "class"), tone) {
			t.Errorf("%s: class %q, want %s", status, attr(b, "class"), tone)
		}
	}
}

func TestEmptyStateSaysWhatToDoNext(t *testing.T) {
	d := render(t, EmptyState(EmptyProps{Title: "No executions yet — try", Command: "attune run core.echo message=hi", TestID: "x-empty"}))
	if got := text(d.one("x-empty")); !strings.Contains(got, "No executions yet") {
		t.Errorf("text %q", got)
	}
	if got := text(d.one("empty-command")); got != "attune run core.echo message=hi" {
		t.Errorf("command %q", got)
	}
}

func TestPostButtonCarriesCSRFAndConfirm(t *testing.T) {
	d := render(t, PostButton(ButtonProps{Action: "/workers/drain", CSRF: "tok", Label: "Drain", TestID: "drain",
		Name: "id", Value: "w1", Confirm: "Sure?", Danger: true}))
	b := d.one("drain")
	if attr(b, "data-confirm") != "Sure?" || !strings.Contains(attr(b, "class"), "danger") {
		t.Errorf("button attrs %v", b.Attr)
	}
	for _, want := range []string{`action="/workers/drain"`, `method="post"`, `name="csrf" value="tok"`, `name="id" value="w1"`} {
		if !strings.Contains(d.raw, want) {
			t.Errorf("missing %s in %s", want, d.raw)
		}
	}
	d = render(t, PostButton(ButtonProps{Action: "/x", CSRF: "tok", Label: "Go", TestID: "go"}))
	if hasAttr(d.one("go"), "data-confirm") {
		t.Error("data-confirm without Confirm")
	}
}

func TestPagerLinks(t *testing.T) {
	render(t, Pager(PagerProps{})).none("pager")
	d := render(t, Pager(PagerProps{FirstURL: "/executions", NextURL: "/executions?before=10"}))
	if attr(d.one("page-next"), "href") != "/executions?before=10" || attr(d.one("page-first"), "href") != "/executions" {
		t.Error(d.raw)
	}
}

func TestLayoutLoggedInAndOut(t *testing.T) {
	out := render(t, Layout(LayoutProps{Title: "Log in"}))
	out.none("nav")
	out.none("logout")
	out.none("live-status")

	in := render(t, Layout(LayoutProps{Title: "Queues", Nav: NavQueues, CSRF: "tok", EventsURL: "/ui/events",
		Flash: &Flash{Text: "Paused core.echo."}}))
	in.one("nav")
	if attr(in.one("nav-queues"), "aria-current") != "page" || hasAttr(in.one("nav-overview"), "aria-current") {
		t.Error("active nav entry not marked")
	}
	if text(in.one("flash")) != "Paused core.echo." {
		t.Error("flash missing")
	}
	in.one("live-status")
	in.one("logout")
	if !strings.Contains(in.raw, `data-events="/ui/events"`) {
		t.Error("no events URL on body")
	}
	for _, name := range []string{"app.css", "app.js"} {
		u := AssetURL(name)
		if !strings.Contains(in.raw, u) || u == StaticPrefix+name {
			t.Errorf("%s: not linked by checksummed URL %s", name, u)
		}
	}
	if strings.Contains(in.raw, "http://") || strings.Contains(in.raw, "https://") {
		t.Error("layout references a remote resource")
	}
}

func TestStaticHandlerServesChecksummedAssets(t *testing.T) {
	h := StaticHandler()
	for name, ctype := range map[string]string{"app.css": "text/css", "app.js": "text/javascript"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, AssetURL(name), nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), ctype) || len(body) == 0 {
			t.Errorf("%s: %d %q %d bytes", name, rec.Code, rec.Header().Get("Content-Type"), len(body))
		}
		if !strings.Contains(rec.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s: not cached as immutable", name)
		}
		if len(body) > 32<<10 {
			t.Errorf("%s: %d bytes; keep the assets small", name, len(body))
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/static/app.css", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("unchecksummed name: %d", rec.Code)
	}
}

func TestFormatting(t *testing.T) {
	for in, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4200: "-4,200"} {
		if got := Num(in); got != want {
			t.Errorf("Num(%d) = %q, want %q", in, got, want)
		}
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850ms", 12 * time.Second: "12s",
		3*time.Minute + 2*time.Second: "3m 02s", 50 * time.Hour: "2d 2h"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
	now := time.Now()
	if Ago(now, now) != "just now" || Ago(now.Add(-90*time.Second), now) != "1m 30s ago" || Ago(time.Time{}, now) != "—" {
		t.Error("Ago")
	}
	n := 4
	if LimitText(nil) != "∞" || LimitText(&n) != "4" || LimitValue(nil) != "" {
		t.Error("limits")
	}
}
