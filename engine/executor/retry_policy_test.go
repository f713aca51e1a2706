package executor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/attune-io/attune/engine/packs"
	"github.com/attune-io/attune/engine/store"
)

func TestBackoffGrowsIsCappedAndJittered(t *testing.T) {
	spec, ok := retryPolicy(json.RawMessage(`{"max_retries": 5, "backoff": {"initial": 1, "max": 5, "multiplier": 2}, "retry_on": ["failed"]}`))
	assert.True(t, ok)
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second, 9: 5 * time.Second} {
		assert.Equal(t, want, backoff(spec, attempt, 0), "attempt %d", attempt)
	}
	assert.Equal(t, 1200*time.Millisecond, backoff(spec, 1, 1), "+20%")
	assert.Equal(t, 800*time.Millisecond, backoff(spec, 1, -1), "-20%")
	assert.Equal(t, 5*time.Second, backoff(spec, 4, 1), "jitter never goes above max")
	assert.Equal(t, 4*time.Second, backoff(spec, 4, -1), "but spreads below it")
}

func TestRetryPolicyDefaultsAndNoPolicy(t *testing.T) {
	for _, raw := range []string{``, `{}`, `{"max_retries": 0, "retry_on": ["failed"]}`, `{"max_retries": 2, "retry_on": []}`, `not json`} {
		_, ok := retryPolicy(json.RawMessage(raw))
		assert.False(t, ok, "%q retries nothing", raw)
	}
	spec, ok := retryPolicy(json.RawMessage(`{"max_retries": 1, "retry_on": ["timeout"]}`))
	assert.True(t, ok)
	assert.Equal(t, packs.DefaultBackoffInitial, spec.Backoff.Initial)
	assert.Equal(t, packs.DefaultBackoffMax, spec.Backoff.Max)
	assert.Equal(t, packs.DefaultBackoffMultiplier, spec.Backoff.Multiplier)
}

func TestRetryCause(t *testing.T) {
	cases := []struct {
		f    store.Finished
		want string
	}{
		{store.Finished{Status: store.StatusFailed, Started: true, Reason: "exit code 1"}, packs.RetryOnFailed},
		{store.Finished{Status: store.StatusTimeout, Started: true}, packs.RetryOnTimeout},
		{store.Finished{Status: store.StatusAbandoned, Started: true}, packs.RetryOnWorkerLost},
		{store.Finished{Status: store.StatusFailed, Reason: ReasonExpiredInQueue}, packs.RetryOnQueueExpired},
		{store.Finished{Status: store.StatusFailed, Reason: reasonNotPickedUp}, packs.RetryOnQueueExpired},
		{store.Finished{Status: store.StatusFailed, Reason: "no worker available for runtime python"}, ""},
		{store.Finished{Status: store.StatusFailed, Reason: "dispatch dead-lettered from worker queue (rejected)"}, ""},
		{store.Finished{Status: store.StatusSucceeded, Started: true}, ""},
		{store.Finished{Status: store.StatusCancelled, Started: true}, ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, retryCause(c.f), "%+v", c.f)
	}
}
