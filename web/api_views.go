package web

import (
	"encoding/json"
	"math"
	"time"

	"github.com/attune-io/attune/engine/store"
)

// timestampLayout is RFC 3339 with exactly six fractional digits
// (microseconds, PostgreSQL's precision): Go's default RFC3339Nano drops
// trailing zeros, which some clients parse badly.
const timestampLayout = "2006-01-02T15:04:05.000000Z07:00"

// apiTime renders a time in UTC with timestampLayout.
type apiTime time.Time

// MarshalJSON writes the time as a timestampLayout string.
func (t apiTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format(timestampLayout) + `"`), nil
}

// UnmarshalJSON reads any RFC 3339 time (so views round-trip in tests).
func (t *apiTime) UnmarshalJSON(b []byte) error {
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = apiTime(tt)
	return nil
}

func optTime(t *time.Time) *apiTime {
	if t == nil {
		return nil
	}
	v := apiTime(*t)
	return &v
}

// rawOrNull keeps an empty (non-nil) raw message from producing invalid JSON.
func rawOrNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return nil
	}
	return m
}

// executionView is an execution as the API shows it. The outer time fields
// shadow the embedded ones in encoding/json (the shallower field wins).
type executionView struct {
	store.Execution
	Parameters  json.RawMessage  `json:"parameters"`
	Result      json.RawMessage  `json:"result"`
	CreatedAt   apiTime          `json:"created_at"`
	UpdatedAt   apiTime          `json:"updated_at"`
	AdmittedAt  *apiTime         `json:"admitted_at"`
	ScheduledAt *apiTime         `json:"scheduled_at"`
	StartedAt   *apiTime         `json:"started_at"`
	FinishedAt  *apiTime         `json:"finished_at"`
	Timeline    []transitionView `json:"timeline,omitempty"`
}

// transitionView is one timeline entry.
type transitionView struct {
	store.Transition
	At apiTime `json:"at"`
}

func viewExecution(e store.Execution) executionView {
	v := executionView{
		Execution:   e,
		Parameters:  rawOrNull(e.Parameters),
		Result:      rawOrNull(e.Result),
		CreatedAt:   apiTime(e.CreatedAt),
		UpdatedAt:   apiTime(e.UpdatedAt),
		AdmittedAt:  optTime(e.AdmittedAt),
		ScheduledAt: optTime(e.ScheduledAt),
		StartedAt:   optTime(e.StartedAt),
		FinishedAt:  optTime(e.FinishedAt),
	}
	for _, t := range e.Timeline {
		v.Timeline = append(v.Timeline, transitionView{Transition: t, At: apiTime(t.At)})
	}
	return v
}

func viewExecutions(es []store.Execution) []executionView {
	out := make([]executionView, 0, len(es))
	for _, e := range es {
		out = append(out, viewExecution(e))
	}
	return out
}

// actionView is an action as the API shows it.
type actionView struct {
	store.Action
	Parameters json.RawMessage `json:"parameters"`
	Retry      json.RawMessage `json:"retry,omitempty"`
	CreatedAt  apiTime         `json:"created_at"`
	UpdatedAt  apiTime         `json:"updated_at"`
}

func viewAction(a store.Action) actionView {
	return actionView{Action: a, Parameters: rawOrNull(a.Parameters), Retry: rawOrNull(a.Retry),
		CreatedAt: apiTime(a.CreatedAt), UpdatedAt: apiTime(a.UpdatedAt)}
}

// queueView is one (action, group) queue as the API shows it.
type queueView struct {
	store.QueueStats
	OldestEnqueuedAt *apiTime `json:"oldest_enqueued_at"`
	LastUpdated      apiTime  `json:"last_updated"`
}

func viewQueues(qs []store.QueueStats) []queueView {
	out := make([]queueView, 0, len(qs))
	for _, q := range qs {
		out = append(out, queueView{QueueStats: q, OldestEnqueuedAt: optTime(q.OldestEnqueuedAt), LastUpdated: apiTime(q.LastUpdated)})
	}
	return out
}

// workerView is a worker as the API shows it, with the age of its last
// heartbeat.
type workerView struct {
	store.Worker
	HeartbeatAt         apiTime  `json:"heartbeat_at"`
	StartedAt           apiTime  `json:"started_at"`
	StoppedAt           *apiTime `json:"stopped_at"`
	HeartbeatAgeSeconds float64  `json:"heartbeat_age_seconds"`
}

func viewWorker(w store.Worker, now time.Time) workerView {
	age := math.Max(0, now.Sub(w.HeartbeatAt).Seconds())
	return workerView{Worker: w, HeartbeatAt: apiTime(w.HeartbeatAt), StartedAt: apiTime(w.StartedAt),
		StoppedAt: optTime(w.StoppedAt), HeartbeatAgeSeconds: math.Round(age*1000) / 1000}
}
