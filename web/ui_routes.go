package web

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"

	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/params"
	"github.com/attune-io/attune/engine/store"
	"github.com/attune-io/attune/ui"
)

// The dashboard reads a few things beyond Reader; *store.Store and
// *executor.Service provide them, and the pages degrade when a Reader or
// Engine does not (tests, partial roles).
type (
	// dashboardReader counts executions and fingerprints changes cheaply.
	dashboardReader interface {
		CountByStatus(ctx context.Context) (map[string]int64, error)
		CountUnfinished(ctx context.Context) (map[string]int64, error)
		ChangeMarks(ctx context.Context) (store.ChangeMarks, error)
	}
	// deadLetterReader lists and discards dead letters.
	deadLetterReader interface {
		ListDeadLetters(ctx context.Context, f store.DeadLetterFilter) ([]store.DeadLetter, int64, error)
		DeleteDeadLetters(ctx context.Context, ids []int64) ([]int64, error)
	}
	// deadLetterReplayer replays one dead letter.
	deadLetterReplayer interface {
		ReplayDeadLetter(ctx context.Context, id int64) (store.DeadLetter, error)
	}
)

// workerStaleAfter is when a worker whose heartbeat stopped shows as down
// (three default heartbeat intervals, as the reaper uses).
const workerStaleAfter = 30 * time.Second

// eventsPath is the dashboard's SSE endpoint.
const eventsPath = "/ui/events"

// uiServer holds the dashboard's handlers.
type uiServer struct {
	engine   Engine
	reader   Reader
	dash     dashboardReader    // nil: overview shows what Reader gives
	letters  deadLetterReader   // nil: dead-letter page unavailable
	replayer deadLetterReplayer // nil: replay unavailable
	sess     *sessions
	hub      *hub
	log      *slog.Logger
	now      func() time.Time
	finished *countCache
}

func newUIServer(d Deps) *uiServer {
	u := &uiServer{engine: d.Engine, reader: d.Reader, sess: newSessions(d.Token), log: d.Logger, now: time.Now}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	u.dash, _ = d.Reader.(dashboardReader)
	u.letters, _ = d.Reader.(deadLetterReader)
	u.replayer, _ = d.Engine.(deadLetterReplayer)
	u.finished = &countCache{ttl: 15 * time.Second}
	var marks func(context.Context) (store.ChangeMarks, error)
	if u.dash != nil {
		marks = u.dash.ChangeMarks
	}
	u.hub = newHub(hubConfig{Source: d.Notifications, Marks: marks, Logger: u.log})
	return u
}

// mountUI mounts the dashboard: static assets, login/logout, the pages, the
// operator actions (POST forms with CSRF tokens) and the SSE stream.
func mountUI(r chi.Router, d Deps) *uiServer {
	u := newUIServer(d)
	r.Handle(ui.StaticPrefix+"*", ui.StaticHandler())
	r.Group(func(r chi.Router) {
		r.Use(uiHeaders, sameOrigin)
		r.Get("/login", u.loginPage)
		r.Post("/login", u.login)
		r.Group(func(r chi.Router) {
			r.Use(u.requireSession)
			r.Get("/logout", u.logoutPage)
			r.Post("/logout", u.logout)
			r.Get(eventsPath, u.events)
			r.Group(func(r chi.Router) {
				r.Use(u.requireEnabled)
				r.Get("/", u.overview)
				r.Get("/queues", u.queues)
				r.Post("/queues/pause", u.setPaused(true))
				r.Post("/queues/resume", u.setPaused(false))
				r.Post("/queues/limit", u.setLimit)
				r.Get("/executions", u.executions)
				r.Get("/executions/{id}", u.execution)
				r.Post("/executions/{id}/cancel", u.cancel)
				r.Post("/executions/{id}/rerun", u.rerun)
				r.Get("/workers", u.workers)
				r.Post("/workers/{op}", u.workerOp)
				r.Get("/dead-letters", u.deadLetters)
				r.Post("/dead-letters/{op}", u.deadLetterOp)
				r.Post("/dead-letters/{id}/{op}", u.deadLetterOp)
			})
		})
	})
	return u
}

// uiHeaders sets the dashboard's security headers: a strict CSP (only our
// own script and styles), no framing, no sniffing, no caching of pages.
func uiHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "+
			"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses state-changing requests a browser marks as coming
// from another site (a second line behind the CSRF tokens).
func sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
				http.Error(w, "cross-site request refused", http.StatusForbidden)
				return
			}
			if o := r.Header.Get("Origin"); o != "" && o != "null" {
				if u, err := url.Parse(o); err != nil || u.Host != r.Host {
					http.Error(w, "cross-origin request refused", http.StatusForbidden)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// requireSession admits requests with a valid session cookie. Pages
// without one redirect to /login (remembering where they were going);
// every POST must carry the session's CSRF token.
func (u *uiServer) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var sess session
		ok := false
		if c, err := r.Cookie(sessionCookie); err == nil {
			sess, ok = u.sess.verify(c.Value, u.now())
		}
		if !ok {
			if r.Method == http.MethodGet && r.URL.Path != eventsPath {
				http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "not logged in", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		}
		if r.Method == http.MethodPost && !sess.checkCSRF(r.PostFormValue("csrf")) {
			u.renderError(w, r, http.StatusForbidden, "Forbidden", "The form's security token is missing or stale. Reload the page and try again.")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
	})
}

// requireEnabled shows 503 when this process runs without the API role.
func (u *uiServer) requireEnabled(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.engine == nil || u.reader == nil {
			u.renderError(w, r, http.StatusServiceUnavailable, "Unavailable", "This appliance runs without the API role; open the dashboard of one that has it.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// layout builds the page frame's props for the logged-in request.
func (u *uiServer) layout(w http.ResponseWriter, r *http.Request, nav ui.Nav, title string) ui.LayoutProps {
	p := ui.LayoutProps{Title: title, Nav: nav, EventsURL: eventsPath}
	if s, ok := sessionFrom(r.Context()); ok {
		p.CSRF = s.CSRF
	}
	if r.Header.Get("X-Attune-Live") == "" { // a live refresh leaves the flash for the page
		if isErr, text, ok := takeFlash(w, r); ok {
			p.Flash = &ui.Flash{Error: isErr, Text: text}
		}
	}
	return p
}

// render writes a component as an HTML response; a render failure becomes
// a plain 500 (nothing was written yet).
func (u *uiServer) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		u.log.Error("render page", "path", r.URL.Path, "err", err)
		http.Error(w, "internal error: see the appliance log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError shows an error page.
func (u *uiServer) renderError(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	p := ui.ErrorPage{Layout: ui.LayoutProps{Title: title}, Code: code, Message: msg}
	if s, ok := sessionFrom(r.Context()); ok {
		p.Layout.CSRF = s.CSRF
	}
	u.render(w, r, code, ui.ErrorView(p))
}

// failPage shows the error page for a failed read.
func (u *uiServer) failPage(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		u.renderError(w, r, http.StatusNotFound, "Not found", "There is nothing here (any more).")
	case r.Context().Err() != nil:
		// the browser went away
	default:
		u.log.Error("dashboard page failed", "path", r.URL.Path, "err", err)
		u.renderError(w, r, http.StatusInternalServerError, "Error", "The page could not be loaded; the appliance log has the details.")
	}
}

// done redirects after an action, with a flash message saying how it went.
func (u *uiServer) done(w http.ResponseWriter, r *http.Request, to string, err error, okText string) {
	if err != nil {
		setFlash(w, r, true, u.actionError(r, err))
	} else {
		setFlash(w, r, false, okText)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// actionError phrases an action's error for the operator; unexpected ones
// are logged and summarised.
func (u *uiServer) actionError(r *http.Request, err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "Not found: " + err.Error()
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrQueueFull), errors.Is(err, executor.ErrUnknownAction):
		return err.Error()
	}
	var verr *params.ValidationError
	var uerr userError
	if errors.As(err, &verr) || errors.As(err, &uerr) {
		return err.Error()
	}
	u.log.Error("dashboard action failed", "path", r.URL.Path, "err", err)
	return "The action failed; the appliance log has the details."
}

// userError is a message for the operator about their input.
type userError string

// Error returns the message.
func (e userError) Error() string { return string(e) }

// loginPage shows the login form with a fresh pre-session CSRF secret.
func (u *uiServer) loginPage(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(sessionCookie); err == nil {
		if _, ok := u.sess.verify(c.Value, u.now()); ok {
			http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
			return
		}
	}
	p := ui.LoginPage{Next: safeNext(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("bye") != "" {
		p.Info = "You are logged out."
	}
	u.renderLogin(w, r, http.StatusOK, p)
}

// renderLogin renders the login form with a new CSRF secret cookie.
func (u *uiServer) renderLogin(w http.ResponseWriter, r *http.Request, status int, p ui.LoginPage) {
	secret := randomHex(16)
	setCookie(w, r, loginCookie, secret, "/login", 3600)
	p.CSRF = u.sess.loginCSRF(secret)
	u.render(w, r, status, ui.LoginView(p))
}

// login checks the form's CSRF token and the admin token, then starts a
// session.
func (u *uiServer) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	next := safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(loginCookie)
	if err != nil || r.PostFormValue("csrf") != u.sess.loginCSRF(c.Value) {
		u.renderLogin(w, r, http.StatusForbidden, ui.LoginPage{Next: next, Error: "The login form expired. Please try again."})
		return
	}
	if !u.sess.checkToken(r.PostFormValue("token")) {
		u.log.Warn("dashboard login refused", "remote", r.RemoteAddr)
		u.renderLogin(w, r, http.StatusUnauthorized, ui.LoginPage{Next: next, Error: "That is not the admin token."})
		return
	}
	_, value := u.sess.issue(u.now())
	setCookie(w, r, sessionCookie, value, "/", int(sessionTTL.Seconds()))
	setCookie(w, r, loginCookie, "", "/login", -1)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logoutPage asks to confirm (logging out is a POST with a CSRF token).
func (u *uiServer) logoutPage(w http.ResponseWriter, r *http.Request) {
	s, _ := sessionFrom(r.Context())
	u.render(w, r, http.StatusOK, ui.LogoutView(s.CSRF))
}

// logout ends the session.
func (u *uiServer) logout(w http.ResponseWriter, r *http.Request) {
	if s, ok := sessionFrom(r.Context()); ok {
		u.sess.revoke(s, u.now())
	}
	setCookie(w, r, sessionCookie, "", "/", -1)
	http.Redirect(w, r, "/login?bye=1", http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "/login") || strings.HasPrefix(next, "/logout") || strings.HasPrefix(next, eventsPath) {
		return "/"
	}
	return next
}
