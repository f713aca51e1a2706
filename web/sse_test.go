package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/messages"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// fakeFeed is a Notifications source the test drives.
type fakeFeed struct {
	fn chan func(messages.ExecutionChanged)
}

func (f *fakeFeed) source(ctx context.Context, fn func(messages.ExecutionChanged)) error {
	f.fn <- fn
	<-ctx.Done()
	return nil
}

// sseStream reads one stream's events in the background.
type sseStream struct {
	events atomic.Int64
	last   atomic.Value // string: data of the last event
	done   chan struct{}
}

func openStream(t *testing.T, b *browser) *sseStream {
	t.Helper()
	resp, err := b.c.Get(b.srv.URL + eventsPath)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sseStream{done: make(chan struct{})}
	t.Cleanup(func() { // before the server's Close, which waits for open requests
		resp.Body.Close()
		<-s.done
	})
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				s.last.Store(data)
				s.events.Add(1)
			}
		}
	}()
	return s
}

// newSSETest serves the dashboard with a driven notification feed and
// returns a logged-in browser.
func newSSETest(t *testing.T, reader Reader) (*browser, *uiServer, *fakeFeed, *httptest.Server) {
	t.Helper()
	eng, st := newFakes()
	if reader == nil {
		reader = st
	}
	feed := &fakeFeed{fn: make(chan func(messages.ExecutionChanged), 1)}
	r := chi.NewRouter()
	u := mountUI(r, Deps{Token: testToken, Engine: eng, Reader: reader, Notifications: feed.source})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	b := &browser{t: t, srv: srv, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	b.login()
	return b, u, feed, srv
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSSECoalescesABurst sends 10,000 notifications within about a second
// to 20 open streams: each stream gets a handful of events (at most one per
// 500 ms), the last naming the changed sections, at little CPU cost.
func TestSSECoalescesABurst(t *testing.T) {
	b, u, feed, _ := newSSETest(t, nil)
	var streams []*sseStream
	for range 20 {
		streams = append(streams, openStream(t, b))
	}
	var fn func(messages.ExecutionChanged)
	select {
	case fn = <-feed.fn:
	case <-time.After(5 * time.Second):
		t.Fatal("the hub never subscribed to the notifications")
	}
	const burst = 10000
	cpu0, start := cpuTime(), time.Now()
	for i := range burst {
		fn(messages.ExecutionChanged{ExecutionID: int64(i), ActionRef: "core.noop", Status: store.StatusSucceeded})
		if i%1000 == 999 {
			time.Sleep(100 * time.Millisecond) // spread the burst over about a second
		}
	}
	took := time.Since(start)
	time.Sleep(1200 * time.Millisecond) // let the trailing event out
	cpu := cpuTime() - cpu0
	var total int64
	for i, s := range streams {
		n := s.events.Load()
		total += n
		// ~1 s of burst at one event per 500 ms, plus the leading and trailing edge.
		if n < 1 || n > 5 {
			t.Errorf("stream %d got %d events for %d notifications", i, n, burst)
		}
		if last, _ := s.last.Load().(string); !strings.Contains(last, `"executions"`) || !strings.Contains(last, `"queues"`) {
			t.Errorf("stream %d: last event %q", i, last)
		}
	}
	st := &u.hub.stats
	t.Logf("burst of %d notifications over %v to %d streams: %d flushes, %d events in all (%.1f per stream), CPU %v",
		burst, took.Round(time.Millisecond), len(streams), st.Flushes.Load(), total, float64(total)/float64(len(streams)), cpu.Round(time.Millisecond))
	if got := st.Notifications.Load(); got != burst {
		t.Errorf("hub counted %d notifications", got)
	}
}

// marksStore serves change marks the test sets.
type marksStore struct {
	*fakeStore
	marks atomic.Value // store.ChangeMarks
}

func (m *marksStore) CountByStatus(context.Context) (map[string]int64, error)   { return nil, nil }
func (m *marksStore) CountUnfinished(context.Context) (map[string]int64, error) { return nil, nil }
func (m *marksStore) ChangeMarks(context.Context) (store.ChangeMarks, error) {
	return m.marks.Load().(store.ChangeMarks), nil
}

// TestSSEChangeMarksNameTheirSections checks that changes no notification
// announces (a new execution requested through the API, a dead letter, a
// worker cordoned) reach the browser through the polled change marks.
func TestSSEChangeMarksNameTheirSections(t *testing.T) {
	_, st := newFakes()
	ms := &marksStore{fakeStore: st}
	ms.marks.Store(store.ChangeMarks{LastExecution: 1, Workers: "a"})
	b, u, _, _ := newSSETest(t, ms)
	u.hub.cfg.Poll = 50 * time.Millisecond
	s := openStream(t, b)
	waitFor(t, "the first poll", func() bool { return u.hub.stats.Polls.Load() > 0 })

	for _, c := range []struct {
		change func(*store.ChangeMarks)
		want   string
	}{
		{func(m *store.ChangeMarks) { m.LastExecution++ }, `{"sections":["executions"]}`},
		{func(m *store.ChangeMarks) { m.Workers = "b" }, `{"sections":["workers"]}`},
		{func(m *store.ChangeMarks) { m.DeadLetters = "1:1:" }, `{"sections":["dead-letters"]}`},
		{func(m *store.ChangeMarks) { m.QueuesUpdated = time.Now() }, `{"sections":["queues"]}`},
	} {
		m := ms.marks.Load().(store.ChangeMarks)
		c.change(&m)
		before := s.events.Load()
		ms.marks.Store(m)
		waitFor(t, c.want, func() bool { return s.events.Load() > before })
		if got := s.last.Load().(string); got != c.want {
			t.Errorf("event %s, want %s", got, c.want)
		}
	}
}

// TestSSEEndsOnServerShutdown checks that an open stream does not hold up
// http.Server.Shutdown.
func TestSSEEndsOnServerShutdown(t *testing.T) {
	b, _, _, srv := newSSETest(t, nil)
	s := openStream(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open stream: %v after %v", err, time.Since(start))
	}
	select {
	case <-s.done:
	case <-time.After(2 * time.Second):
		t.Fatal("stream still open after shutdown")
	}
}

func TestThroughputRing(t *testing.T) {
	var r throughputRing
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	// 100 completions per second, 120 requests per second, sampled each second for 5 minutes.
	for s := 0; s <= 300; s++ {
		r.add(throughputSample{At: t0.Add(time.Duration(s) * time.Second), Enqueued: int64(120 * s), Completed: int64(100 * s)})
	}
	now := t0.Add(300 * time.Second)
	sum := r.summary(now)
	if len(sum.Bars) != throughputMinutes {
		t.Fatalf("%d bars", len(sum.Bars))
	}
	for i, bar := range sum.Bars {
		covered := i >= throughputMinutes-5
		if covered != (bar.PerMinute != nil) {
			t.Errorf("bar %d (%s): covered=%v value=%v", i, bar.Label, covered, bar.PerMinute)
		}
		if bar.PerMinute != nil && (*bar.PerMinute < 5999 || *bar.PerMinute > 6001) {
			t.Errorf("bar %d: %v/min, want 6000", i, *bar.PerMinute)
		}
	}
	if sum.PerSecond == nil || *sum.PerSecond != 100 || *sum.Requested != 120 {
		t.Errorf("current rate %v %v", sum.PerSecond, sum.Requested)
	}
	// Old samples are dropped; a counter reset never shows a negative rate.
	r.add(throughputSample{At: now.Add(30 * time.Minute)})
	r.add(throughputSample{At: now.Add(30*time.Minute + 5*time.Second), Completed: 10})
	if len(r.samples) != 2 {
		t.Errorf("kept %d samples", len(r.samples))
	}
	if c, _ := perSecond(throughputSample{At: t0, Completed: 50}, throughputSample{At: t0.Add(time.Second)}); c != 0 {
		t.Errorf("rate after reset %v", c)
	}
}

func TestHubStopsWhenNobodyWatches(t *testing.T) {
	h := newHub(hubConfig{Linger: time.Millisecond, Poll: 10 * time.Millisecond})
	_, leave := h.subscribe()
	leave()
	waitFor(t, "the loop to stop", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return !h.running
	})
	h.notify(ui.SectionQueues) // no streams: nothing to do, nothing blocks
}
