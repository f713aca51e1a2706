// Package ui holds the dashboard's templ components and pages and its
// embedded static assets. It renders typed page models built by the web
// package's handlers and never reads data itself.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var staticFS embed.FS

// StaticPrefix is the URL path under which assets are served.
const StaticPrefix = "/static/"

// asset is one embedded file with its checksummed name.
type asset struct {
	body  []byte
	ctype string
}

var (
	assetURLs  = map[string]string{} // logical name → /static/name.<hash>.ext
	assetFiles = map[string]asset{}  // checksummed name → file
)

func init() {
	err := fs.WalkDir(staticFS, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := staticFS.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		sum := sha256.Sum256(b)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		assetURLs[name] = StaticPrefix + hashed
		assetFiles[hashed] = asset{body: b, ctype: mime.TypeByExtension(ext)}
		return nil
	})
	if err != nil {
		panic("ui: embedded assets: " + err.Error())
	}
}

// AssetURL returns the checksummed URL of an embedded asset ("app.css"), so
// a new binary's assets are never mixed with a browser's cached old ones.
func AssetURL(name string) string {
	if u, ok := assetURLs[name]; ok {
		return u
	}
	return StaticPrefix + name
}

// StaticHandler serves the embedded assets by checksummed name, cached
// forever (the name changes when the content does). Mount it at StaticPrefix.
func StaticHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, StaticPrefix)
		a, ok := assetFiles[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
		h.Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(a.body)
	})
}
