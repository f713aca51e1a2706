package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func at(ms int) *time.Time {
	t := time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond)
	return &t
}

func TestAnalyzeDetectsFIFOViolationsAndOverLimit(t *testing.T) {
	base := *at(0)
	execs := []Execution{
		{ID: 1, Status: "succeeded", CreatedAt: base, AdmittedAt: at(1), StartedAt: at(2), FinishedAt: at(10)},
		{ID: 2, Status: "succeeded", CreatedAt: base, AdmittedAt: at(12), StartedAt: at(13), FinishedAt: at(20)},
		// 3 admitted before 2 although requested after it, and while 1 still ran.
		{ID: 3, Status: "succeeded", CreatedAt: base, AdmittedAt: at(5), StartedAt: at(6), FinishedAt: at(30)},
		{ID: 4, Status: "running", CreatedAt: base, AdmittedAt: at(31), StartedAt: at(32)},
	}
	r := Analyze(execs, 1, 1, "core.noop")
	assert.Equal(t, 1, r.FIFOViolations)
	assert.Equal(t, 2, r.MaxActiveObserved)
	assert.Equal(t, 1, r.Lost)
	assert.InDelta(t, 3/0.030, r.ExecPerSec, 0.01)
}

func TestAnalyzeCleanRunAndGroups(t *testing.T) {
	base := *at(0)
	var execs []Execution
	for i := range 10 {
		g := []string{"a", "b"}[i%2]
		execs = append(execs, Execution{ID: int64(i + 1), Status: "succeeded", GroupKey: g, CreatedAt: base,
			AdmittedAt: at(i * 10), StartedAt: at(i*10 + 1), FinishedAt: at(i*10 + 10)})
	}
	r := Analyze(execs, 1, 2, "core.noop")
	assert.Zero(t, r.FIFOViolations)
	assert.Equal(t, 1, r.MaxActiveObserved, "a finish at the same instant as the next admission frees the slot first")
	assert.Zero(t, r.Lost)
	assert.Equal(t, Percentiles{P50: 41, P95: 91, P99: 91}, r.DispatchLatencyMs, "nearest-rank percentiles")
}
