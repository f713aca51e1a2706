package ui

import "time"

// ExecutionPage is the model of /executions/{id}.
type ExecutionPage struct {
	Layout LayoutProps
	Now    time.Time
	Exec   ExecutionDetail
	// CanCancel is true while the execution has not reached a final status.
	CanCancel bool
}

// ExecutionDetail is everything shown about one execution. JSON fields are
// already pretty-printed.
type ExecutionDetail struct {
	ID            int64
	ActionRef     string
	Status        string
	Reason        string
	GroupKey      string
	Worker        string
	Attempt       int
	RetryOf       *int64
	Params        string
	Result        string
	Error         string
	Stdout        string
	Stderr        string
	StdoutCut     bool
	StderrCut     bool
	ExitCode      *int
	Took          *time.Duration
	QueuePosition *int64
	CreatedAt     time.Time
	AdmittedAt    *time.Time
	ScheduledAt   *time.Time
	StartedAt     *time.Time
	FinishedAt    *time.Time
	Timeline      []TimelineEntry
}

// TimelineEntry is one status change.
type TimelineEntry struct {
	From   string
	To     string
	Reason string
	Worker string
	At     time.Time
	// Since is the time spent since the previous entry.
	Since time.Duration
}

// at dereferences an optional time (zero when nil).
func at(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}
