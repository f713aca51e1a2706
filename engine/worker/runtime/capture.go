package runtime

import "sync"

// cappedBuffer keeps the first limit bytes written to it and silently counts
// the rest. Writes never fail and never block, so the goroutine draining a
// child's pipe keeps reading past the cap: a chatty child must not stall on a
// full pipe just because we stopped storing its output.
type cappedBuffer struct {
	mu        sync.Mutex
	buf       []byte
	limit     int
	truncated bool
}

// newCappedBuffer returns a buffer that stores at most limit bytes.
func newCappedBuffer(limit int) *cappedBuffer {
	return &cappedBuffer{limit: limit}
}

// Write stores what fits and reports the whole of p as written.
func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := c.limit - len(c.buf)
	if len(p) > room {
		c.truncated = true
		c.buf = append(c.buf, p[:max(room, 0)]...)
	} else {
		c.buf = append(c.buf, p...)
	}
	return len(p), nil
}

// Bytes returns the stored bytes.
func (c *cappedBuffer) Bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf
}

// Truncated reports whether anything was dropped.
func (c *cappedBuffer) Truncated() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.truncated
}
