package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireToken admits only requests carrying `Authorization: Bearer <token>`
// with the admin token: a missing or malformed header is 401, a wrong token
// 403. The comparison takes the same time whatever the presented token is
// (both sides are hashed first, so not even the length leaks). An empty
// configured token refuses every request: the API is never open by accident.
func requireToken(token string) func(http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ok := bearerToken(r.Header.Get("Authorization"))
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="attune"`)
				writeError(w, http.StatusUnauthorized, "missing or malformed Authorization header",
					"expected `Authorization: Bearer <token>`; the admin token is in <data-dir>/admin.token")
				return
			}
			sum := sha256.Sum256([]byte(got))
			if token == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="attune", error="invalid_token"`)
				writeError(w, http.StatusForbidden, "invalid token", nil)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// bearerToken extracts the token of a "Bearer <token>" header value. The
// scheme is case-insensitive (RFC 6750); the token must be non-empty and
// contain no whitespace.
func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", false
	}
	return tok, true
}
