package bus

import (
	"strings"
	"testing"
	"time"
)

// The retry delay starts at Topology.RetryDelay (1 s when unset) and
// doubles per attempt up to MaxRetryDelay; a topology refuses a delay
// outside 0 to MaxRetryDelay.
func TestRetryDelayDoublesFromTheFirst(t *testing.T) {
	for _, c := range []struct {
		first   time.Duration
		attempt uint64
		want    time.Duration
	}{
		{0, 1, time.Second}, {0, 3, 4 * time.Second}, {0, 10, MaxRetryDelay},
		{50 * time.Millisecond, 1, 50 * time.Millisecond}, {50 * time.Millisecond, 3, 200 * time.Millisecond},
		{20 * time.Second, 2, MaxRetryDelay}, {time.Second, 1 << 40, MaxRetryDelay},
	} {
		if got := retryDelay(c.first, c.attempt); got != c.want {
			t.Errorf("retryDelay(%s, %d) = %s, want %s", c.first, c.attempt, got, c.want)
		}
	}
	if d := (Topology{}).WithDefaults().RetryDelay; d != time.Second {
		t.Errorf("default retry delay %s, want 1s", d)
	}
	for _, d := range []time.Duration{-time.Millisecond, MaxRetryDelay + 1} {
		err := Topology{RetryDelay: d}.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), "retry delay") {
			t.Errorf("retry delay %s: %v, want it refused", d, err)
		}
	}
}
