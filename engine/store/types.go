package store

import (
	"encoding/json"
	"time"
)

// Execution statuses (DESIGN.md, "Execution state machine").
const (
	StatusRequested  = "requested"
	StatusScheduling = "scheduling"
	StatusQueued     = "queued"
	StatusScheduled  = "scheduled"
	StatusRunning    = "running"
	StatusSucceeded  = "succeeded"
	StatusFailed     = "failed"
	StatusTimeout    = "timeout"
	StatusCanceling  = "canceling"
	StatusCancelled  = "cancelled"
	StatusAbandoned  = "abandoned"
)

// AllStatuses lists every status in state-machine order.
var AllStatuses = []string{StatusRequested, StatusScheduling, StatusQueued, StatusScheduled, StatusRunning,
	StatusSucceeded, StatusFailed, StatusTimeout, StatusCanceling, StatusCancelled, StatusAbandoned}

// IsFinal reports whether status is an end state.
func IsFinal(status string) bool {
	switch status {
	case StatusSucceeded, StatusFailed, StatusTimeout, StatusCancelled, StatusAbandoned:
		return true
	}
	return false
}

// Pack groups actions.
type Pack struct {
	Ref         string `json:"ref"`
	Description string `json:"description"`
	Path        string `json:"path"`
}

// Action is a runnable unit of a pack.
type Action struct {
	Ref            string          `json:"ref"`
	Pack           string          `json:"pack"`
	Name           string          `json:"name"`
	Description    string          `json:"description"`
	Runtime        string          `json:"runtime"`
	Entrypoint     string          `json:"entrypoint"`
	PackPath       string          `json:"-"`
	Parameters     json.RawMessage `json:"parameters"`
	TimeoutSeconds float64         `json:"timeout"`
	Policy         Policy          `json:"policy"`
	Retry          json.RawMessage `json:"retry,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
}

// Policy is an action's admission policy.
type Policy struct {
	Concurrency    Concurrency `json:"concurrency"`
	MaxQueueLength *int        `json:"max_queue_length,omitempty"`
	QueueTimeout   *int        `json:"queue_timeout,omitempty"` // seconds
	RateLimit      *RateLimit  `json:"rate_limit,omitempty"`
	Paused         bool        `json:"paused"`
}

// Concurrency limits how many executions of an action (per group) run at once.
type Concurrency struct {
	Limit   *int     `json:"limit,omitempty"`
	GroupBy []string `json:"group_by,omitempty"`
	OnLimit string   `json:"on_limit,omitempty"` // enqueue (default) | cancel
}

// RateLimit admits at most Max executions per Window seconds.
type RateLimit struct {
	Max    int     `json:"max"`
	Window float64 `json:"window"`
}

// Execution is one requested run of an action.
type Execution struct {
	ID              int64           `json:"id"`
	ActionRef       string          `json:"action_ref"`
	Parameters      json.RawMessage `json:"parameters"`
	Status          string          `json:"status"`
	StatusReason    *string         `json:"status_reason"`
	GroupKey        string          `json:"group_key"`
	Result          json.RawMessage `json:"result"`
	Error           *string         `json:"error"`
	Worker          *string         `json:"worker"`
	Attempt         int             `json:"attempt"`
	RetryOf         *int64          `json:"retry_of"`
	TimeoutSeconds  *float64        `json:"timeout,omitempty"`
	Stdout          *string         `json:"stdout"`
	Stderr          *string         `json:"stderr"`
	StdoutTruncated bool            `json:"stdout_truncated"`
	StderrTruncated bool            `json:"stderr_truncated"`
	ExitCode        *int            `json:"exit_code"`
	DurationMs      *float64        `json:"duration_ms"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	AdmittedAt      *time.Time      `json:"admitted_at"`
	ScheduledAt     *time.Time      `json:"scheduled_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	QueuePosition   *int64          `json:"queue_position,omitempty"`
	Timeline        []Transition    `json:"timeline,omitempty"`
}

// Transition is one recorded status change.
type Transition struct {
	From   *string   `json:"from"`
	To     string    `json:"to"`
	Reason *string   `json:"reason"`
	Worker *string   `json:"worker"`
	At     time.Time `json:"at"`
}

// Woken is an execution promoted by admission that needs a wake-up message
// after the transaction commits.
type Woken struct {
	ExecutionID int64
}

// Admission is what an admission statement did: executions it woke (publish
// execution.requested for each after commit) and, when a rate window held
// the head back, when that window reopens.
type Admission struct {
	Woken        []int64
	NextWindowAt *time.Time
}

// Worker is a registered worker engine.
type Worker struct {
	ID          string     `json:"id"`
	Host        string     `json:"host"`
	Runtimes    []string   `json:"runtimes"`
	Capacity    int        `json:"capacity"`
	Running     int        `json:"running"`
	Status      string     `json:"status"`
	HeartbeatAt time.Time  `json:"heartbeat_at"`
	StartedAt   time.Time  `json:"started_at"`
	StoppedAt   *time.Time `json:"stopped_at"`
	Version     string     `json:"version"`
}

// Worker statuses.
const (
	WorkerActive   = "active"
	WorkerDraining = "draining"
	WorkerCordoned = "cordoned"
	WorkerInactive = "inactive"
)

// QueueStats is the telemetry of one (action, group) queue.
type QueueStats struct {
	ActionRef        string     `json:"action_ref"`
	GroupKey         string     `json:"group_key"`
	QueueLength      int        `json:"queue_length"`
	ActiveCount      int        `json:"active_count"`
	Limit            *int       `json:"limit"`
	MaxConcurrent    *int       `json:"max_concurrent"`
	OldestEnqueuedAt *time.Time `json:"oldest_enqueued_at"`
	TotalEnqueued    int64      `json:"total_enqueued"`
	TotalCompleted   int64      `json:"total_completed"`
	LastUpdated      time.Time  `json:"last_updated"`
	Paused           bool       `json:"paused"`
}
