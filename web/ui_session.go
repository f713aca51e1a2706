package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Dashboard sessions are stateless signed cookies, so any appliance of a
// cluster that shares the admin token accepts them and a restart keeps
// operators logged in. The signing key is derived from the admin token:
// rotating the token ends every session. Logout revokes the session id on
// this node (kept until the session would have expired) and clears the
// cookie.
const (
	sessionCookie = "attune_session"
	loginCookie   = "attune_login" // pre-session CSRF secret of the login form
	flashCookie   = "attune_flash"
	sessionTTL    = 12 * time.Hour
)

// sessions signs and checks session cookies and CSRF tokens.
type sessions struct {
	key     []byte
	token   [32]byte // sha256 of the admin token
	enabled bool     // false when no admin token is configured

	mu      sync.Mutex
	revoked map[string]time.Time // session id → when its cookie expires
}

// session is a verified dashboard session.
type session struct {
	ID      string
	Expires time.Time
	CSRF    string
}

func newSessions(adminToken string) *sessions {
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("attune dashboard session v1"))
	return &sessions{key: m.Sum(nil), token: sha256.Sum256([]byte(adminToken)), enabled: adminToken != "",
		revoked: map[string]time.Time{}}
}

// mac signs parts joined by "|".
func (s *sessions) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(strings.Join(parts, "|")))
	return m.Sum(nil)
}

// checkToken compares a presented admin token in constant time.
func (s *sessions) checkToken(presented string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(presented)))
	return s.enabled && subtle.ConstantTimeCompare(sum[:], s.token[:]) == 1
}

// issue creates a session and its cookie value.
func (s *sessions) issue(now time.Time) (session, string) {
	id := randomHex(16)
	exp := now.Add(sessionTTL).Truncate(time.Second)
	payload := "v1|" + strconv.FormatInt(exp.Unix(), 10) + "|" + id
	value := b64(payload) + "." + b64(string(s.mac("session", payload)))
	return s.session(id, exp), value
}

func (s *sessions) session(id string, exp time.Time) session {
	return session{ID: id, Expires: exp, CSRF: b64(string(s.mac("csrf", id)))[:32]}
}

// verify checks a session cookie value: signature, expiry and revocation.
func (s *sessions) verify(value string, now time.Time) (session, bool) {
	if !s.enabled {
		return session{}, false
	}
	p64, m64, ok := strings.Cut(value, ".")
	if !ok {
		return session{}, false
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p64)
	mac, err2 := base64.RawURLEncoding.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, s.mac("session", string(payload))) {
		return session{}, false
	}
	parts := strings.Split(string(payload), "|")
	if len(parts) != 3 || parts[0] != "v1" {
		return session{}, false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	exp := time.Unix(unix, 0)
	if err != nil || !now.Before(exp) {
		return session{}, false
	}
	s.mu.Lock()
	_, gone := s.revoked[parts[2]]
	s.mu.Unlock()
	if gone {
		return session{}, false
	}
	return s.session(parts[2], exp), true
}

// revoke ends a session on this node before its expiry.
func (s *sessions) revoke(sess session, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, exp := range s.revoked {
		if now.After(exp) {
			delete(s.revoked, id)
		}
	}
	s.revoked[sess.ID] = sess.Expires
}

// checkCSRF compares a form's token with the session's.
func (sess session) checkCSRF(presented string) bool {
	return presented != "" && subtle.ConstantTimeCompare([]byte(presented), []byte(sess.CSRF)) == 1
}

// loginCSRF is the login form's token for a pre-session secret.
func (s *sessions) loginCSRF(secret string) string {
	return b64(string(s.mac("login", secret)))[:32]
}

// sessionKey is the context key of the request's session.
type sessionKey struct{}

// sessionFrom returns the session the middleware verified.
func sessionFrom(ctx context.Context) (session, bool) {
	s, ok := ctx.Value(sessionKey{}).(session)
	return s, ok
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// setCookie sets an HttpOnly, SameSite=Lax cookie (Secure over TLS).
func setCookie(w http.ResponseWriter, r *http.Request, name, value, path string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode})
}

// setFlash stores a one-time message for the next page.
func setFlash(w http.ResponseWriter, r *http.Request, isErr bool, text string) {
	kind := "ok"
	if isErr {
		kind = "err"
	}
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	setCookie(w, r, flashCookie, b64(kind+"|"+text), "/", 60)
}

// takeFlash reads and clears the one-time message.
func takeFlash(w http.ResponseWriter, r *http.Request) (isErr bool, text string, ok bool) {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return false, "", false
	}
	setCookie(w, r, flashCookie, "", "/", -1)
	raw, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return false, "", false
	}
	kind, text, found := strings.Cut(string(raw), "|")
	return kind == "err", text, found && text != ""
}
