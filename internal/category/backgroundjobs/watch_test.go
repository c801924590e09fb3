package backgroundjobs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestWatchIsNotStranded: reports stored while Watch runs are all
// applied (here: terminated, their jobs unknown) even when the server
// drops Watch's pull requests without a word.
//
// nats.go's Consume counts the reports its requests still have coming
// (package repull says how it comes to count more than the server
// holds); the state is made here every time: a consumer that keeps one
// pull request at most (MaxWaiting 1) drops the re-pull sent while the
// first request (64) still waits, and once that request is filled, the
// client counts 33 more coming and asks for none. Its missed heartbeats
// (2 × 15 s) would pull again after 30 s: the deadline, 20 s, is met only
// if Watch pulls again by itself.
func TestWatchIsNotStranded(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	svc, err := backgroundjobs.New(ctx, js, backgroundjobs.Config{Storage: jetstream.MemoryStorage, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := natstest.OnePullWaiting(t, js, backgroundjobs.Stream, backgroundjobs.ConsumerReports)
	done := make(chan error, 1)
	go func() { done <- svc.Watch(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	const first, reports = 40, 120
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			subject := backgroundjobs.Subject(backgroundjobs.PrefixReport, "a1", fmt.Sprintf("j%d", i))
			if _, err := js.Publish(ctx, subject, []byte(`{"status":"running"}`)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// settled waits until n reports were delivered and none is pending
	// or unacknowledged, or the deadline.
	settled := func(n uint64, wait time.Duration) (*jetstream.ConsumerInfo, bool) {
		var info *jetstream.ConsumerInfo
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if info, err = c.Info(ctx); err != nil {
				t.Fatal(err)
			}
			if info.Delivered.Consumer >= n && info.NumPending == 0 && info.NumAckPending == 0 {
				return info, true
			}
		}
		return info, false
	}
	// The first request (64) takes the 40 reports and waits for 24 more;
	// the re-pull sent meanwhile is dropped.
	publish(0, first)
	if info, ok := settled(first, 30*time.Second); !ok {
		t.Fatalf("the first %d reports were not applied: %+v", first, info)
	}
	publish(first, reports)
	if info, ok := settled(reports, 20*time.Second); !ok {
		t.Fatalf("%d of %d reports were delivered, %d still stored, %d pull requests waiting: Watch's pull stopped", info.Delivered.Consumer, reports, info.NumPending, info.NumWaiting)
	}
}
