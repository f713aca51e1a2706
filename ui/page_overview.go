package ui

import "time"

// OverviewPage is the model of /.
type OverviewPage struct {
	Layout LayoutProps
	Now    time.Time
	// InFlight counts executions by in-flight status, in state-machine order.
	InFlight []StatusCount
	// Finished counts executions by final status; FinishedAt is when they
	// were counted (the count is cached: it scans the whole table).
	Finished   []StatusCount
	FinishedAt time.Time
	Throughput Throughput
	WorkersUp  int
	// WorkersDown counts workers that stopped or whose heartbeat is stale.
	WorkersDown int
	// DLQDepth is the number of dead letters not yet replayed or discarded;
	// nil when the dead-letter store is not available.
	DLQDepth *int64
	Busiest  []QueueRow
}

// StatusCount is how many executions are in one status.
type StatusCount struct {
	Status string
	N      int64
}

// Throughput is completions per minute over the last minutes, sampled from
// the queues' completion counters by this node.
type Throughput struct {
	// Bars are oldest first; a nil PerMinute means no samples covered it.
	Bars []ThroughputBar
	// PerSecond is the rate over the last few seconds; nil before the
	// second sample.
	PerSecond *float64
	// Requested is the request rate per second over the same seconds.
	Requested *float64
}

// ThroughputBar is one minute of the throughput chart.
type ThroughputBar struct {
	Label     string // "-3m"
	PerMinute *float64
}

// chartMax is the tallest bar of the chart (at least 1).
func (t Throughput) chartMax() float64 {
	m := 1.0
	for _, b := range t.Bars {
		if b.PerMinute != nil && *b.PerMinute > m {
			m = *b.PerMinute
		}
	}
	return m
}

// barHeight is the height of bar b in a chart 100 units tall.
func (t Throughput) barHeight(b ThroughputBar) float64 {
	if b.PerMinute == nil {
		return 0
	}
	return max(1, *b.PerMinute/t.chartMax()*100)
}

// TotalInFlight sums InFlight.
func (p OverviewPage) TotalInFlight() int64 {
	var n int64
	for _, c := range p.InFlight {
		n += c.N
	}
	return n
}
