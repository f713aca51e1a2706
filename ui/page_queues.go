package ui

import "time"

// QueuesPage is the model of /queues.
type QueuesPage struct {
	Layout  LayoutProps
	Now     time.Time
	Actions []ActionQueues
}

// ActionQueues is one action's policy controls and its (action, group)
// queues.
type ActionQueues struct {
	Ref     string
	Limit   *int // per group; nil = unlimited
	Paused  bool
	GroupBy []string
	Queues  []QueueRow
}

// QueueRow is one (action, group) queue.
type QueueRow struct {
	ActionRef string
	GroupKey  string
	Length    int
	Active    int
	Limit     *int
	// OldestAt is when the oldest waiting execution was enqueued.
	OldestAt  *time.Time
	Enqueued  int64
	Completed int64
	Paused    bool
}

// groupLabel shows the group key, or "(all)" for the action's only queue.
func groupLabel(k string) string {
	if k == "" {
		return "(all)"
	}
	return k
}

// oldestWait is how long the head of the queue has been waiting.
func (q QueueRow) oldestWait(now time.Time) string {
	if q.OldestAt == nil || q.Length == 0 {
		return "—"
	}
	return Duration(now.Sub(*q.OldestAt))
}
