package web

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// dashStore adds the dashboard's optional reads to the API fakes.
type dashStore struct {
	*fakeStore
	mu      sync.Mutex
	marks   store.ChangeMarks
	letters []store.DeadLetter
	counted int // CountByStatus calls
}

func (d *dashStore) CountByStatus(context.Context) (map[string]int64, error) {
	d.mu.Lock()
	d.counted++
	d.mu.Unlock()
	return map[string]int64{"succeeded": 1234567, "failed": 3, "queued": 9}, nil
}

func (d *dashStore) CountUnfinished(context.Context) (map[string]int64, error) {
	return map[string]int64{"queued": 9, "running": 2}, nil
}

func (d *dashStore) ChangeMarks(context.Context) (store.ChangeMarks, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.marks, nil
}

func (d *dashStore) ListDeadLetters(_ context.Context, f store.DeadLetterFilter) ([]store.DeadLetter, int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]store.DeadLetter(nil), d.letters...), 0, nil
}

func (d *dashStore) DeleteDeadLetters(_ context.Context, ids []int64) ([]int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var gone []int64
	kept := d.letters[:0]
	for _, l := range d.letters {
		if containsID(ids, l.ID) {
			gone = append(gone, l.ID)
		} else {
			kept = append(kept, l)
		}
	}
	d.letters = kept
	return gone, nil
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// replayEngine adds dead-letter replay to the fake engine.
type replayEngine struct {
	*fakeEngine
	replayed []int64
}

func (e *replayEngine) ReplayDeadLetter(_ context.Context, id int64) (store.DeadLetter, error) {
	if id == 404 {
		return store.DeadLetter{}, store.ErrNotFound
	}
	e.replayed = append(e.replayed, id)
	next := int64(1000 + id)
	return store.DeadLetter{ID: id, ReplayExecutionID: &next}, nil
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t   *testing.T
	srv *httptest.Server
	c   *http.Client
}

func newUITest(t *testing.T) (*browser, *replayEngine, *dashStore) {
	t.Helper()
	eng, st := newFakes()
	ds := &dashStore{fakeStore: st, letters: []store.DeadLetter{{ID: 5, Reason: "expired", Queue: "worker.w1.executions", Payload: []byte(`{"execution_id":8}`)}}}
	re := &replayEngine{fakeEngine: eng}
	srv := httptest.NewServer(NewRouter(Deps{Token: testToken, Engine: re, Reader: ds}))
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, srv: srv, c: c}, re, ds
}

func (b *browser) do(method, path string, form url.Values, hdr ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp, string(raw)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrfOf extracts the first form token of a page.
func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in\n%s", page)
	}
	return m[1]
}

// login logs in and returns the session's CSRF token.
func (b *browser) login() string {
	b.t.Helper()
	_, page := b.do("GET", "/login", nil)
	resp, _ := b.do("POST", "/login", url.Values{"csrf": {csrfOf(b.t, page)}, "token": {testToken}, "next": {"/queues"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/queues" {
		b.t.Fatalf("login: %d → %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = b.do("GET", "/queues", nil)
	return csrfOf(b.t, page)
}

func TestUIRedirectsToLoginAndBack(t *testing.T) {
	b, _, _ := newUITest(t)
	resp, _ := b.do("GET", "/executions?status=failed", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2Fexecutions%3Fstatus%3Dfailed" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.do("GET", eventsPath, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("events without session: %d", resp.StatusCode)
	}
	_, page := b.do("GET", "/login?next=%2Fexecutions%3Fstatus%3Dfailed", nil)
	csrf := csrfOf(t, page)

	resp, page = b.do("POST", "/login", url.Values{"csrf": {csrf}, "token": {"wrong"}, "next": {"/executions?status=failed"}})
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(page, "not the admin token") {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	resp, _ = b.do("POST", "/login", url.Values{"csrf": {"forged"}, "token": {testToken}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("forged login csrf: %d", resp.StatusCode)
	}
	_, page = b.do("GET", "/login", nil)
	resp, _ = b.do("POST", "/login", url.Values{"csrf": {csrfOf(t, page)}, "token": {testToken}, "next": {"//evil.example/x"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Errorf("open redirect: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie && (!c.HttpOnly || c.SameSite != http.SameSiteLaxMode) {
			t.Errorf("session cookie flags %+v", c)
		}
	}
	resp, page = b.do("GET", "/", nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `data-testid="overview"`) {
		t.Fatalf("overview after login: %d", resp.StatusCode)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestUIFormsNeedCSRFAndSameOrigin(t *testing.T) {
	b, eng, _ := newUITest(t)
	csrf := b.login()
	resp, _ := b.do("POST", "/queues/pause", url.Values{"ref": {"core.noop"}})
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("no csrf: %d", resp.StatusCode)
	}
	resp, _ = b.do("POST", "/queues/pause", url.Values{"ref": {"core.noop"}, "csrf": {csrf}}, "Sec-Fetch-Site", "cross-site")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site: %d", resp.StatusCode)
	}
	resp, _ = b.do("POST", "/queues/pause", url.Values{"ref": {"core.noop"}, "csrf": {csrf}}, "Origin", "http://evil.example")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin: %d", resp.StatusCode)
	}
	if eng.st.actions["core.noop"].Policy.Paused != true { // fixture starts paused; nothing changed
		t.Error("policy changed by a refused request")
	}
	resp, _ = b.do("POST", "/queues/resume", url.Values{"ref": {"core.noop"}, "csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || eng.st.actions["core.noop"].Policy.Paused {
		t.Fatalf("resume: %d paused=%v", resp.StatusCode, eng.st.actions["core.noop"].Policy.Paused)
	}
	_, page := b.do("GET", "/queues", nil)
	if !strings.Contains(page, "Resumed core.noop.") {
		t.Error("no flash after resume")
	}
	_, page = b.do("GET", "/queues", nil)
	if strings.Contains(page, "Resumed core.noop.") {
		t.Error("flash shown twice")
	}
}

func TestUIQueueLimit(t *testing.T) {
	b, eng, _ := newUITest(t)
	csrf := b.login()
	b.do("POST", "/queues/limit", url.Values{"ref": {"core.noop"}, "limit": {"3"}, "csrf": {csrf}})
	if l := eng.st.actions["core.noop"].Policy.Concurrency.Limit; l == nil || *l != 3 || !eng.st.actions["core.noop"].Policy.Paused {
		t.Fatalf("limit %v (the rest of the policy must stay)", l)
	}
	b.do("POST", "/queues/limit", url.Values{"ref": {"core.noop"}, "limit": {""}, "csrf": {csrf}})
	if l := eng.st.actions["core.noop"].Policy.Concurrency.Limit; l != nil {
		t.Fatalf("empty limit should mean unlimited, got %d", *l)
	}
	b.do("POST", "/queues/limit", url.Values{"ref": {"core.noop"}, "limit": {"-1"}, "csrf": {csrf}})
	_, page := b.do("GET", "/queues", nil)
	if !strings.Contains(page, "whole number from 1 to 100000") {
		t.Error("bad limit not explained")
	}
}

func TestUIExecutions(t *testing.T) {
	b, eng, st := newUITest(t)
	csrf := b.login()
	st.next = 7
	resp, page := b.do("GET", "/executions?status=queued&action=core.sleep", nil)
	if resp.StatusCode != 200 || strings.Count(page, `data-testid="execution-row"`) != 2 {
		t.Fatalf("list: %d", resp.StatusCode)
	}
	f := st.lastFilter
	if len(f.Statuses) != 1 || f.Statuses[0] != "queued" || f.ActionRef != "core.sleep" || f.Limit != executionsPerPage {
		t.Errorf("filter %+v", f)
	}
	if !strings.Contains(page, `href="/executions?action=core.sleep&amp;before=7&amp;status=queued"`) {
		t.Error("older page link keeps the filter")
	}
	b.do("GET", "/executions?status=bogus&before=x", nil)
	if f := st.lastFilter; len(f.Statuses) != 0 || f.Before != 0 {
		t.Errorf("bad filter values should be ignored: %+v", f)
	}

	_, page = b.do("GET", "/executions/8", nil)
	if !strings.Contains(page, `data-testid="cancel"`) {
		t.Error("queued execution offers no cancel")
	}
	if resp, _ := b.do("GET", "/executions/999", nil); resp.StatusCode != 404 {
		t.Errorf("missing execution: %d", resp.StatusCode)
	}
	resp, _ = b.do("POST", "/executions/8/cancel", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || st.execs[8].Status != store.StatusCancelled {
		t.Fatalf("cancel: %d %s", resp.StatusCode, st.execs[8].Status)
	}
	b.do("POST", "/executions/7/cancel", url.Values{"csrf": {csrf}})
	if _, page = b.do("GET", "/executions/7", nil); !strings.Contains(page, "already finished") {
		t.Error("cancelling a finished execution is not explained")
	}
	resp, _ = b.do("POST", "/executions/7/rerun", url.Values{"csrf": {csrf}})
	if resp.Header.Get("Location") != "/executions/42" || len(eng.requests) != 1 || eng.requests[0].ActionRef != "core.noop" {
		t.Errorf("rerun: %s %+v", resp.Header.Get("Location"), eng.requests)
	}
}

func TestUIWorkersAndDeadLetters(t *testing.T) {
	b, eng, ds := newUITest(t)
	csrf := b.login()
	_, page := b.do("GET", "/workers", nil)
	if !strings.Contains(page, `data-id="w1"`) || !strings.Contains(page, `data-testid="drain"`) {
		t.Fatal("worker row")
	}
	b.do("POST", "/workers/cordon", url.Values{"id": {"w1"}, "csrf": {csrf}})
	if ds.workers["w1"].Status != store.WorkerCordoned {
		t.Error("cordon")
	}
	if resp, _ := b.do("POST", "/workers/explode", url.Values{"id": {"w1"}, "csrf": {csrf}}); resp.StatusCode != 404 {
		t.Error("unknown worker op")
	}

	_, page = b.do("GET", "/dead-letters", nil)
	if !strings.Contains(page, `data-testid="dead-letter-row" data-id="5"`) {
		t.Fatal("dead letter row")
	}
	b.do("POST", "/dead-letters/5/replay", url.Values{"csrf": {csrf}})
	if _, page = b.do("GET", "/dead-letters", nil); len(eng.replayed) != 1 || !strings.Contains(page, "Replayed #5 as execution 1005") {
		t.Errorf("replay one: %v", eng.replayed)
	}
	b.do("POST", "/dead-letters/replay", url.Values{"csrf": {csrf}, "id": {"5", "404"}})
	if _, page = b.do("GET", "/dead-letters", nil); !strings.Contains(page, "Not replayed: #404") {
		t.Error("partial failure of a bulk replay not reported")
	}
	b.do("POST", "/dead-letters/discard", url.Values{"csrf": {csrf}, "id": {"5"}})
	if _, page = b.do("GET", "/dead-letters", nil); !strings.Contains(page, `data-testid="dead-letters-empty"`) || !strings.Contains(page, "Discarded 1 dead letter.") {
		t.Error("discard")
	}
}

func TestUILogoutEndsSession(t *testing.T) {
	b, _, _ := newUITest(t)
	csrf := b.login()
	u, _ := url.Parse(b.srv.URL)
	old := b.c.Jar.Cookies(u)
	resp, _ := b.do("POST", "/logout", url.Values{"csrf": {csrf}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?bye=1" {
		t.Fatalf("logout: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := b.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Error("still logged in")
	}
	b.c.Jar.SetCookies(u, old) // a copied cookie is revoked too
	if resp, _ := b.do("GET", "/", nil); resp.StatusCode != http.StatusSeeOther {
		t.Error("revoked session accepted")
	}
}

func TestSessionCookieTampering(t *testing.T) {
	s := newSessions("tok")
	now := time.Now()
	sess, v := s.issue(now)
	if got, ok := s.verify(v, now); !ok || got.CSRF != sess.CSRF || got.CSRF == "" {
		t.Fatal("valid cookie refused")
	}
	if _, ok := s.verify(v, now.Add(sessionTTL+time.Second)); ok {
		t.Error("expired cookie accepted")
	}
	if _, ok := newSessions("other").verify(v, now); ok {
		t.Error("cookie of another token accepted")
	}
	if _, ok := s.verify(strings.Replace(v, ".", "x.", 1), now); ok {
		t.Error("tampered cookie accepted")
	}
	if _, ok := newSessions("").verify(v, now); ok || newSessions("").checkToken("") {
		t.Error("empty admin token must refuse everything")
	}
	if !sess.checkCSRF(sess.CSRF) || sess.checkCSRF("") || sess.checkCSRF("x") {
		t.Error("csrf check")
	}
}

func TestOverviewCountsAreCached(t *testing.T) {
	b, _, ds := newUITest(t)
	b.login()
	for range 5 {
		resp, page := b.do("GET", "/", nil)
		if resp.StatusCode != 200 || !strings.Contains(page, "1,234,567") {
			t.Fatal("overview")
		}
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.counted != 1 {
		t.Errorf("CountByStatus ran %d times for 5 views", ds.counted)
	}
}
