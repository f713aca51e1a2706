package web

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// ssePing is how often an idle stream sends a comment, so proxies and the
// browser see the connection alive.
const ssePing = 25 * time.Second

// events serves the dashboard's SSE stream: "refresh" events whose data is
// {"sections": [...]}, at most one per Coalesce interval.
func (u *uiServer) events(w http.ResponseWriter, r *http.Request) {
	// Register for server shutdown before the browser sees the stream.
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	closing := u.hub.closing(srv)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(w, s); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\n: hello\n\n") {
		return
	}
	c, unsubscribe := u.hub.subscribe()
	defer unsubscribe()
	ping := time.NewTicker(ssePing)
	defer ping.Stop()
	var last time.Time
	for {
		select {
		case <-r.Context().Done():
			return
		case <-closing:
			return
		case <-ping.C:
			if !send(": ping\n\n") {
				return
			}
		case <-c.signal:
			// Per-stream gap: whatever arrives meanwhile is merged into
			// this one event.
			if wait := time.Until(last.Add(u.hub.cfg.Coalesce)); wait > 0 {
				select {
				case <-r.Context().Done():
					return
				case <-closing:
					return
				case <-time.After(wait):
				}
			}
			sections := c.take()
			if len(sections) == 0 {
				continue
			}
			b, _ := json.Marshal(struct {
				Sections []string `json:"sections"`
			}{sections})
			if !send("event: refresh\ndata: " + string(b) + "\n\n") {
				return
			}
			u.hub.stats.Events.Add(1)
			last = time.Now()
		}
	}
}
