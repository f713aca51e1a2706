package ui

import "time"

// WorkersPage is the model of /workers.
type WorkersPage struct {
	Layout  LayoutProps
	Now     time.Time
	Workers []WorkerRow
}

// WorkerRow is one worker.
type WorkerRow struct {
	ID          string
	Host        string
	Status      string
	HeartbeatAt time.Time
	// Stale is true when the heartbeat is older than the staleness limit
	// although the worker is not marked inactive yet.
	Stale     bool
	Running   int
	Capacity  int
	Runtimes  []string
	Version   string
	StartedAt time.Time
}

// shownStatus is the status to display: a stale worker shows as "down".
func (w WorkerRow) shownStatus() string {
	if w.Stale {
		return "down"
	}
	return w.Status
}
