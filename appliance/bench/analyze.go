// Package bench drives a running appliance with many executions and measures
// throughput, latency and the admission guarantees from the recorded data:
// FIFO order per group and the concurrency limit.
package bench

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Execution is the part of an execution the analysis needs.
type Execution struct {
	ID         int64      `json:"id"`
	Status     string     `json:"status"`
	GroupKey   string     `json:"group_key"`
	CreatedAt  time.Time  `json:"created_at"`
	AdmittedAt *time.Time `json:"admitted_at"`
	StartedAt  *time.Time `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
}

// Percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
}

// Report is the result of one benchmark run (the JSON of `attune bench --json`).
type Report struct {
	Executions        int         `json:"executions"`
	Concurrency       int         `json:"concurrency"`
	Groups            int         `json:"groups"`
	Action            string      `json:"action"`
	Seconds           float64     `json:"seconds"`
	ExecPerSec        float64     `json:"exec_per_sec"`
	DispatchLatencyMs Percentiles `json:"dispatch_latency_ms"`
	E2ELatencyMs      Percentiles `json:"e2e_latency_ms"`
	FIFOViolations    int         `json:"fifo_violations"`
	MaxActiveObserved int         `json:"max_active_observed"`
	Lost              int         `json:"lost"`
	Failed            int         `json:"failed"`
}

// Analyze computes a report from the executions of one run. Request order
// within a group is id order (the id is assigned under the queue's lock);
// admission order is admitted_at order. Every adjacent pair admitted out of
// request order counts as a violation. Active = admitted and not finished.
func Analyze(execs []Execution, concurrency, groups int, action string) Report {
	r := Report{Executions: len(execs), Concurrency: concurrency, Groups: groups, Action: action}
	var first, last time.Time
	var dispatch, e2e []float64
	byGroup := map[string][]Execution{}
	for _, e := range execs {
		byGroup[e.GroupKey] = append(byGroup[e.GroupKey], e)
		if e.FinishedAt == nil {
			r.Lost++
			continue
		}
		if e.Status != "succeeded" {
			r.Failed++
		}
		if first.IsZero() || e.CreatedAt.Before(first) {
			first = e.CreatedAt
		}
		if e.FinishedAt.After(last) {
			last = *e.FinishedAt
		}
		if e.StartedAt != nil {
			dispatch = append(dispatch, ms(e.StartedAt.Sub(e.CreatedAt)))
		}
		e2e = append(e2e, ms(e.FinishedAt.Sub(e.CreatedAt)))
	}
	if !first.IsZero() {
		r.Seconds = last.Sub(first).Seconds()
		if r.Seconds > 0 {
			r.ExecPerSec = float64(len(execs)-r.Lost) / r.Seconds
		}
	}
	r.DispatchLatencyMs = percentiles(dispatch)
	r.E2ELatencyMs = percentiles(e2e)
	for _, g := range byGroup {
		r.FIFOViolations += fifoViolations(g)
		r.MaxActiveObserved = max(r.MaxActiveObserved, maxActive(g))
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fifoViolations(g []Execution) int {
	slices.SortFunc(g, func(a, b Execution) int { return int(a.ID - b.ID) })
	n := 0
	var prev *time.Time
	for _, e := range g {
		if e.AdmittedAt == nil {
			continue
		}
		if prev != nil && e.AdmittedAt.Before(*prev) {
			n++
		}
		prev = e.AdmittedAt
	}
	return n
}

// maxActive sweeps admission (+1) and finish (-1) events; at equal times
// the finish counts first, since a slot is released before it is reused.
func maxActive(g []Execution) int {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, e := range g {
		if e.AdmittedAt == nil {
			continue
		}
		evs = append(evs, ev{*e.AdmittedAt, +1})
		if e.FinishedAt != nil {
			evs = append(evs, ev{*e.FinishedAt, -1})
		}
	}
	sort.Slice(evs, func(i, j int) bool {
		if evs[i].at.Equal(evs[j].at) {
			return evs[i].delta < evs[j].delta
		}
		return evs[i].at.Before(evs[j].at)
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

func percentiles(v []float64) Percentiles {
	if len(v) == 0 {
		return Percentiles{}
	}
	slices.Sort(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return math.Round(v[max(i, 0)]*100) / 100
	}
	return Percentiles{P50: at(0.50), P95: at(0.95), P99: at(0.99)}
}
