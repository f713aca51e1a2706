package ui

import (
	"strings"
	"testing"
	"time"
)

var (
	now    = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	layout = LayoutProps{Title: "T", CSRF: "tok", EventsURL: "/ui/events"}
)

func ptr[T any](v T) *T { return &v }

func TestLoginView(t *testing.T) {
	d := render(t, LoginView(LoginPage{CSRF: "c1", Next: "/queues", Error: "That is not the admin token."}))
	form := d.one("login-form")
	if attr(form, "method") != "post" || attr(form, "action") != "/login" {
		t.Error("form target")
	}
	if attr(d.one("login-token"), "name") != "token" || attr(d.one("login-token"), "type") != "password" {
		t.Error("token field")
	}
	if !strings.Contains(d.raw, `name="csrf" value="c1"`) || !strings.Contains(d.raw, `name="next" value="/queues"`) {
		t.Error("hidden fields")
	}
	d.one("login-error")
	d.none("nav")
}

func TestExecutionsViewEmptyStates(t *testing.T) {
	d := render(t, ExecutionsView(ExecutionsPage{Layout: layout, Now: now, Statuses: []string{"queued", "running"}}))
	if got := text(d.one("executions-empty")); !strings.Contains(got, "No executions yet — try attune run core.echo message=hi") {
		t.Errorf("empty state %q", got)
	}
	d.none("execution-table")
	d.none("pager")

	d = render(t, ExecutionsView(ExecutionsPage{Layout: layout, Now: now, Filter: ExecutionFilter{Status: "failed"}}))
	if got := text(d.one("executions-empty")); !strings.Contains(got, "match this filter") {
		t.Errorf("filtered empty state %q", got)
	}
	d.one("filter-clear")
}

func TestExecutionsViewRowsFilterAndPager(t *testing.T) {
	took := 1500 * time.Millisecond
	p := ExecutionsPage{Layout: layout, Now: now, Filter: ExecutionFilter{Status: "running", Action: "core.echo"},
		Statuses: []string{"queued", "running"}, Actions: []string{"core.echo", "core.noop"},
		Rows: []ExecutionRow{
			{ID: 12, ActionRef: "core.echo", Status: "running", CreatedAt: now.Add(-time.Minute), Took: &took, Worker: "w1"},
			{ID: 11, ActionRef: "core.echo", Status: "running", CreatedAt: now.Add(-2 * time.Minute)},
		},
		Pager: PagerProps{NextURL: ExecutionFilter{Status: "running", Action: "core.echo", Before: 11}.URL()}}
	d := render(t, ExecutionsView(p))
	rows := d.all("execution-row")
	if len(rows) != 2 || attr(rows[0], "data-id") != "12" || attr(rows[0], "data-status") != "running" {
		t.Fatalf("rows %d", len(rows))
	}
	if attr(within(rows[0], "execution-link")[0], "href") != "/executions/12" {
		t.Error("row link")
	}
	if !strings.Contains(text(rows[0]), "1.5s") || !strings.Contains(text(rows[0]), "1m 00s ago") {
		t.Errorf("row text %q", text(rows[0]))
	}
	if got := attr(d.one("page-next"), "href"); got != "/executions?action=core.echo&before=11&status=running" {
		t.Errorf("next page %q", got)
	}
	if !strings.Contains(d.raw, `<option value="running" selected>`) || !strings.Contains(d.raw, `<option value="core.echo" selected>`) {
		t.Error("filter selections not kept")
	}
	if attr(d.one("executions"), "data-region") != SectionExecutions {
		t.Error("list is not a live region")
	}
}

func TestExecutionView(t *testing.T) {
	took := 2 * time.Second
	started := now.Add(-3 * time.Second)
	p := ExecutionPage{Layout: layout, Now: now, CanCancel: true, Exec: ExecutionDetail{ID: 7, ActionRef: "core.sleep",
		Status: "queued", Reason: "waiting for a slot", Attempt: 1, Params: "{\n  \"seconds\": 5\n}", Stdout: "hello\n",
		StdoutCut: true, Took: &took, QueuePosition: ptr(int64(3)), CreatedAt: now.Add(-time.Minute), StartedAt: &started,
		Timeline: []TimelineEntry{{To: "requested", At: now.Add(-time.Minute)}, {From: "requested", To: "queued", At: now.Add(-59 * time.Second), Since: time.Second}}}}
	d := render(t, ExecutionView(p))
	if attr(within(d.one("execution-status"), "status")[0], "data-status") != "queued" {
		t.Error("status")
	}
	if text(d.one("queue-position")) != "3" {
		t.Error("queue position")
	}
	if n := len(d.all("timeline-entry")); n != 2 {
		t.Errorf("timeline entries %d", n)
	}
	if !strings.Contains(text(d.one("params")), `"seconds": 5`) || text(d.one("stdout")) != "hello" {
		t.Error("params/stdout")
	}
	if text(d.one("worker")) != "not assigned" {
		t.Error("worker")
	}
	if !strings.Contains(d.raw, `action="/executions/7/cancel"`) || !strings.Contains(d.raw, `action="/executions/7/rerun"`) {
		t.Error("cancel/rerun forms")
	}
	d.none("result")
	d.none("stderr")

	p.CanCancel = false
	render(t, ExecutionView(p)).none("cancel")
}

func TestQueuesView(t *testing.T) {
	limit := 2
	oldest := now.Add(-42 * time.Second)
	p := QueuesPage{Layout: layout, Now: now, Actions: []ActionQueues{
		{Ref: "core.echo", Limit: &limit, Queues: []QueueRow{{ActionRef: "core.echo", Length: 5, Active: 2, Limit: &limit, OldestAt: &oldest, Enqueued: 1234}}},
		{Ref: "core.sleep", Paused: true, GroupBy: []string{"host"}},
	}}
	d := render(t, QueuesView(p))
	cards := d.all("queue-card")
	if len(cards) != 2 || attr(cards[0], "data-ref") != "core.echo" {
		t.Fatalf("cards %d", len(cards))
	}
	if len(within(cards[0], "pause")) != 1 || len(within(cards[0], "resume")) != 0 {
		t.Error("running queue should offer pause")
	}
	if len(within(cards[1], "resume")) != 1 || len(within(cards[1], "no-queues")) != 1 {
		t.Error("paused action should offer resume and say it has no queues")
	}
	if attr(within(cards[0], "limit-input")[0], "value") != "2" || attr(within(cards[1], "limit-input")[0], "value") != "" {
		t.Error("limit inputs")
	}
	row := d.one("queue-row")
	if text(within(row, "queue-length")[0]) != "5" || text(within(row, "queue-active")[0]) != "2 / 2" || text(within(row, "queue-oldest")[0]) != "42s" {
		t.Errorf("row %q", text(row))
	}
	if attr(d.one("queues"), "data-region") != SectionQueues {
		t.Error("queues are not a live region")
	}
	render(t, QueuesView(QueuesPage{Layout: layout})).one("queues-empty")
}

func TestWorkersView(t *testing.T) {
	p := WorkersPage{Layout: layout, Now: now, Workers: []WorkerRow{
		{ID: "w-active", Status: "active", HeartbeatAt: now.Add(-3 * time.Second), Running: 2, Capacity: 8, Runtimes: []string{"builtin", "shell"}},
		{ID: "w-cordoned", Status: "cordoned", HeartbeatAt: now.Add(-time.Second)},
		{ID: "w-stale", Status: "active", Stale: true, HeartbeatAt: now.Add(-5 * time.Minute)},
	}}
	d := render(t, WorkersView(p))
	rows := d.all("worker-row")
	if len(rows) != 3 {
		t.Fatalf("rows %d", len(rows))
	}
	if len(within(rows[0], "drain")) != 1 || len(within(rows[0], "cordon")) != 1 || len(within(rows[0], "uncordon")) != 0 {
		t.Error("active worker actions")
	}
	if len(within(rows[1], "uncordon")) != 1 || len(within(rows[1], "drain")) != 0 {
		t.Error("cordoned worker actions")
	}
	if attr(within(rows[2], "status")[0], "data-status") != "down" {
		t.Error("stale worker should show as down")
	}
	if !strings.Contains(text(within(rows[0], "load")[0]), "2/8") || text(within(rows[0], "heartbeat")[0]) != "3.0s ago" {
		t.Errorf("load/heartbeat %q %q", text(within(rows[0], "load")[0]), text(within(rows[0], "heartbeat")[0]))
	}
	render(t, WorkersView(WorkersPage{Layout: layout})).one("workers-empty")
}

func TestDeadLettersView(t *testing.T) {
	p := DeadLettersPage{Layout: layout, Now: now, Letters: []DeadLetterRow{
		{ID: 9, Reason: "expired", Queue: "worker.w1.executions", ExecutionID: ptr(int64(77)), Payload: `{"execution_id": 77}`, CreatedAt: now.Add(-time.Hour)},
		{ID: 8, Reason: "rejected", ReplayedAt: ptr(now), ReplayExecutionID: ptr(int64(78)), Payload: "x"},
	}}
	d := render(t, DeadLettersView(p))
	rows := d.all("dead-letter-row")
	if len(rows) != 2 {
		t.Fatalf("rows %d", len(rows))
	}
	if len(within(rows[0], "replay")) != 1 || len(within(rows[1], "replay")) != 0 {
		t.Error("replay offered only when not replayed")
	}
	if attr(within(rows[0], "replay")[0], "formaction") != "/dead-letters/9/replay" {
		t.Error("per-row replay target")
	}
	if attr(within(rows[0], "dead-letter-execution")[0], "href") != "/executions/77" || attr(within(rows[1], "replayed-as")[0], "href") != "/executions/78" {
		t.Error("execution links")
	}
	if !strings.Contains(text(within(rows[0], "payload")[0]), `"execution_id": 77`) {
		t.Error("payload")
	}
	d.one("replay-selected")
	d.one("discard-selected")
	d.one("select-all")

	render(t, DeadLettersView(DeadLettersPage{Layout: layout})).one("dead-letters-empty")
	render(t, DeadLettersView(DeadLettersPage{Layout: layout, Unavailable: "no"})).one("dead-letters-unavailable")
}

func TestOverviewView(t *testing.T) {
	perMin := 600.0
	rate := 10.0
	p := OverviewPage{Layout: layout, Now: now,
		InFlight:   []StatusCount{{"requested", 1}, {"queued", 1500}, {"running", 3}},
		Finished:   []StatusCount{{"succeeded", 1000000}, {"failed", 2}},
		FinishedAt: now.Add(-5 * time.Second),
		Throughput: Throughput{Bars: []ThroughputBar{{Label: "-2m"}, {Label: "-1m", PerMinute: &perMin}}, PerSecond: &rate, Requested: &rate},
		WorkersUp:  2, WorkersDown: 1, DLQDepth: ptr(int64(4)),
		Busiest: []QueueRow{{ActionRef: "core.echo", Length: 1500, Active: 5}},
	}
	d := render(t, OverviewView(p))
	if text(within(d.one("count-queued"), "stat-value")[0]) != "1,500" {
		t.Error("queued count")
	}
	if text(within(d.one("count-succeeded"), "stat-value")[0]) != "1,000,000" {
		t.Error("succeeded count")
	}
	if text(within(d.one("workers-down"), "stat-value")[0]) != "1" || text(within(d.one("dlq-depth"), "stat-value")[0]) != "4" {
		t.Error("workers/dlq")
	}
	if text(d.one("rate-completed")) != "10/s" {
		t.Errorf("rate %q", text(d.one("rate-completed")))
	}
	if strings.Count(d.raw, "<rect") != 2 || !strings.Contains(d.raw, `class="nodata"`) {
		t.Error("chart bars")
	}
	if attr(d.one("queue-row"), "data-ref") != "core.echo" {
		t.Error("busiest queue")
	}
	if !strings.Contains(attr(d.one("overview"), "data-region"), SectionWorkers) {
		t.Error("overview region sections")
	}

	empty := render(t, OverviewView(OverviewPage{Layout: layout, Now: now, Throughput: Throughput{Bars: []ThroughputBar{{Label: "-1m"}}}}))
	empty.one("busiest-empty")
	empty.none("dlq-depth")
	empty.none("rate-completed")
}
