package ui

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ago formats how long before now t was, compactly ("just now", "42s ago",
// "5m ago", "3h ago", "2d ago").
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < time.Second {
		return "just now"
	}
	return Duration(d) + " ago"
}

// Duration formats d with one or two units: "850ms", "12.3s", "5m 02s",
// "3h 10m", "2d 4h".
func Duration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + "ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// Num formats n with thousands separators ("1,234,567").
func Num[T ~int | ~int64](n T) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Stamp formats t for a tooltip or a datetime attribute (RFC 3339, UTC).
func Stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

// Clock formats t as a wall-clock time in UTC ("15:04:05").
func Clock(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("15:04:05.000")
}

// Rate formats a per-minute or per-second rate with a sensible precision.
func Rate(v float64) string {
	switch {
	case v >= 100:
		return Num(int64(v + 0.5))
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v > 0:
		return fmt.Sprintf("%.1f", v)
	}
	return "0"
}

// LimitText formats a concurrency limit; nil means unlimited.
func LimitText(limit *int) string {
	if limit == nil {
		return "∞"
	}
	return strconv.Itoa(*limit)
}

// LimitValue is a limit for an input field; nil means empty.
func LimitValue(limit *int) string {
	if limit == nil {
		return ""
	}
	return strconv.Itoa(*limit)
}

// StatusTone groups execution and worker statuses by the colour they are
// shown in: "ok", "bad", "warn", "busy", "wait" or "idle".
func StatusTone(status string) string {
	switch status {
	case "succeeded", "active":
		return "ok"
	case "failed", "timeout", "abandoned", "inactive", "down":
		return "bad"
	case "queued", "draining", "cordoned", "paused", "canceling":
		return "warn"
	case "running":
		return "busy"
	case "requested", "scheduling", "scheduled":
		return "wait"
	}
	return "idle"
}
