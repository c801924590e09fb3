package diagnostics

import (
	"context"
	"errors"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/heaptest"
)

// TestSleepHeldInFlight bounds what a sleep keeps while it waits, beside
// its goroutine: load runs (bench/inflight) keep thousands in flight, and
// what each keeps is counted in the worker's heap per call. One timer and
// a wait on two channels: about 460 B (amd64); a ticker and an end timer,
// with a wait on three channels, 850 B. Goroutines ended before the test
// leave their records for the sleeps' goroutines: what is counted is
// the sleep's own.
func TestSleepHeldInFlight(t *testing.T) {
	const n = 2000
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	heaptest.WarmGoroutines(n) // the sleeps'
	var started, done sync.WaitGroup
	started.Add(n)
	before := heaptest.LiveHeap()
	for range n {
		done.Go(func() {
			started.Done()
			if err := sleep(ctx, 600000, time.Minute); !errors.Is(err, context.Canceled) {
				t.Errorf("sleep = %v, want its context's cause", err)
			}
		})
	}
	started.Wait()
	// Every sleep is at its wait once it has made its timer and parked in
	// its select.
	for waited := time.Duration(0); waiting() < n; waited += 10 * time.Millisecond {
		if waited > time.Minute {
			t.Fatalf("%d of %d sleeps at their wait", waiting(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := heaptest.LiveHeap()
	cancel(context.Canceled)
	done.Wait()
	per := float64(after-before) / n
	t.Logf("%.0f B of heap per sleep in flight", per)
	if per > 640 {
		t.Errorf("a sleep in flight keeps %.0f B of heap, over 640", per)
	}
}

// waiting counts the goroutines parked in sleep's select.
func waiting() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	n := 0
	for _, g := range strings.Split(b.String(), "\n\n") {
		if strings.Contains(g, " [select") && strings.Contains(g, "diagnostics.sleep(") {
			n++
		}
	}
	return n
}
