package web

import (
	"fmt"
	"time"

	"github.com/attune-io/attune/ui"
)

// Throughput is measured from the queues' enqueued/completed counters
// (kept exactly by the admission transactions), sampled by the hub while
// anyone watches: counting finished rows per minute would scan millions of
// executions at full speed.
const (
	throughputMinutes = 15
	throughputKeep    = (throughputMinutes + 1) * time.Minute
	rateWindow        = 10 * time.Second
)

// throughputSample is one reading of the counters.
type throughputSample struct {
	At                  time.Time
	Enqueued, Completed int64
}

// throughputRing holds the samples of the last minutes, oldest first.
type throughputRing struct {
	samples []throughputSample
}

// add records a sample (at most one per 500 ms) and drops old ones.
func (t *throughputRing) add(s throughputSample) {
	if n := len(t.samples); n > 0 && s.At.Sub(t.samples[n-1].At) < 500*time.Millisecond {
		t.samples[n-1] = s
		return
	}
	t.samples = append(t.samples, s)
	drop := 0
	for drop < len(t.samples) && s.At.Sub(t.samples[drop].At) > throughputKeep {
		drop++
	}
	if drop > 0 {
		t.samples = append(t.samples[:0], t.samples[drop:]...)
	}
}

// span returns the first sample at or after from and the last at or before
// to; ok is false when they do not cover at least a sixth of the interval
// (ten seconds of a minute: enough to extrapolate a rate).
func (t *throughputRing) span(from, to time.Time) (a, b throughputSample, ok bool) {
	first, last := -1, -1
	for i, s := range t.samples {
		if s.At.Before(from) || s.At.After(to) {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
	}
	if first < 0 || last <= first {
		return a, b, false
	}
	a, b = t.samples[first], t.samples[last]
	return a, b, b.At.Sub(a.At) >= to.Sub(from)/6
}

// perSecond is the counters' rate between two samples (0 after a reset).
func perSecond(a, b throughputSample) (completed, enqueued float64) {
	secs := b.At.Sub(a.At).Seconds()
	if secs <= 0 {
		return 0, 0
	}
	return max(0, float64(b.Completed-a.Completed)/secs), max(0, float64(b.Enqueued-a.Enqueued)/secs)
}

// summary is the overview's chart: completions per minute for each of the
// last minutes, and the current rates.
func (t *throughputRing) summary(now time.Time) ui.Throughput {
	var out ui.Throughput
	for i := throughputMinutes; i >= 1; i-- {
		bar := ui.ThroughputBar{Label: fmt.Sprintf("-%dm", i)}
		from := now.Add(-time.Duration(i) * time.Minute)
		if a, b, ok := t.span(from, from.Add(time.Minute)); ok {
			c, _ := perSecond(a, b)
			v := c * 60
			bar.PerMinute = &v
		}
		out.Bars = append(out.Bars, bar)
	}
	if a, b, ok := t.span(now.Add(-rateWindow), now); ok || (b.At.Sub(a.At) >= time.Second) {
		c, e := perSecond(a, b)
		out.PerSecond, out.Requested = &c, &e
	}
	return out
}
