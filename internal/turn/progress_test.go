package turn_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// progressRecorder is a recorder that also keeps progress events, and
// the order of progress and ends.
type progressRecorder struct {
	*recorder
	mu     sync.Mutex
	events []protocol.Activity
	log    []string // "progress <call>" or "ended <call>"
	seen   chan int64
}

func newProgressRecorder() *progressRecorder {
	return &progressRecorder{recorder: newRecorder(), seen: make(chan int64, 1<<16)}
}

func (r *progressRecorder) CallProgress(ref turn.JournalRef, a protocol.Activity) {
	r.mu.Lock()
	r.events = append(r.events, a)
	r.log = append(r.log, "progress "+ref.CallID)
	r.mu.Unlock()
	select {
	case r.seen <- a.Progress.Done:
	default:
	}
}

func (r *progressRecorder) CallEnded(ref turn.JournalRef, o *turn.Outcome) {
	r.mu.Lock()
	r.log = append(r.log, "ended "+ref.CallID)
	r.mu.Unlock()
	r.recorder.CallEnded(ref, o)
}

func (r *progressRecorder) snapshot() ([]protocol.Activity, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]protocol.Activity(nil), r.events...), append([]string(nil), r.log...)
}

// waitDone waits until a progress event with done ≥ want was published.
func (r *progressRecorder) waitDone(ctx context.Context, want int64) bool {
	for {
		select {
		case d := <-r.seen:
			if d >= want {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// noProgressAfterEnd fails when a call's progress came after its end.
func noProgressAfterEnd(t *testing.T, log []string) {
	t.Helper()
	ended := map[string]bool{}
	for _, e := range log {
		kind, id, _ := strings.Cut(e, " ")
		if kind == "ended" {
			ended[id] = true
		} else if ended[id] {
			t.Fatalf("progress of %s after its end: %q", id, log)
		}
	}
}

// A tool that reports as fast as it can gets at most one event per
// interval, the latest value each time, and its last report is published
// while it waits (the trailing publish), before the call ends.
func TestProgressRateLimitedKeepsLatest(t *testing.T) {
	obs := newProgressRecorder()
	const last = 1_000_000
	flood := newTool(t, "flood", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		for i := int64(1); i <= last; i++ {
			tool.ReportProgress(ctx, i, last, "")
		}
		wctx, cancel := context.WithTimeout(ctx, waitLimit)
		defer cancel()
		if !obs.waitDone(wctx, last) {
			return tool.Result{}, tool.Errorf(tool.ToolError, "the last report was never published")
		}
		return tool.Result{Content: "ok"}, nil
	}, readOnly)
	set := mustSet(t, flood)
	start := time.Now()
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, observe(obs, input(call("c1", "flood", `{}`))))
	elapsed := time.Since(start)
	if err := res.Outcomes[0].Err; err != nil {
		t.Fatal(err.Message)
	}
	events, log := obs.snapshot()
	noProgressAfterEnd(t, log)
	if len(events) == 0 {
		t.Fatal("no progress event")
	}
	// Events are at least an interval apart: n events span (n-1) intervals.
	if bound := int(elapsed/turn.ProgressInterval) + 2; len(events) > bound {
		t.Fatalf("%d progress events in %v, over the bound of %d", len(events), elapsed, bound)
	}
	var prev int64 = -1
	for _, a := range events {
		if a.State != protocol.ActivityProgress || a.CallID != "c1" || a.Name != "flood" || a.Label != "Running flood" {
			t.Fatalf("event %+v", a)
		}
		if a.Progress.Done < prev {
			t.Fatalf("done went back from %d to %d", prev, a.Progress.Done)
		}
		if a.Progress.Total == nil || *a.Progress.Total != last {
			t.Fatalf("total %v, want %d", a.Progress.Total, last)
		}
		prev = a.Progress.Done
	}
	if prev != last {
		t.Fatalf("the last event has done %d, want %d", prev, last)
	}
}

// Reports after the call ended (a tool that ignores its context and is
// left behind by the watchdog) are dropped, and none is published after
// the call's end, even one that was waiting for its interval.
func TestProgressNoneAfterEnd(t *testing.T) {
	obs := newProgressRecorder()
	release := make(chan struct{})
	stopped := make(chan struct{})
	stubborn := newTool(t, "stubborn", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		defer close(stopped)
		for i := int64(1); ; i++ {
			tool.ReportProgress(ctx, i, 0, "working")
			select {
			case <-release:
				return tool.Result{Content: "late"}, nil
			default:
			}
		}
	}, readOnly, withTimeout(50*time.Millisecond))
	set := mustSet(t, stubborn)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, observe(obs, input(call("c1", "stubborn", `{}`))))
	if res.Outcomes[0].Err == nil || res.Outcomes[0].Err.Kind != tool.Timeout {
		t.Fatalf("outcome %+v, want a timeout", res.Outcomes[0].Err)
	}
	// The tool keeps reporting for two more intervals after its end; had
	// any report been kept, its publish would be due by then.
	time.Sleep(2 * turn.ProgressInterval)
	close(release)
	<-stopped
	time.Sleep(2 * turn.ProgressInterval)
	events, log := obs.snapshot()
	noProgressAfterEnd(t, log)
	if len(events) == 0 {
		t.Fatal("no progress while the call ran")
	}
	for _, a := range events {
		if a.Label != "working" || a.Progress.Total != nil {
			t.Fatalf("event %+v", a)
		}
	}
}

// What a tool reports is bounded: negative done is 0, a total below done
// is no total, a long or broken label is cut to valid UTF-8, an empty one
// is the call's started label.
func TestProgressBoundsReports(t *testing.T) {
	long := strings.Repeat("é", 300) + "\xff"
	cases := []struct {
		name        string
		done, total int64
		label       string
		wantDone    int64
		wantTotal   int64 // 0: none
		check       func(string) bool
	}{
		{"negative", -5, -1, "x", 0, 0, func(l string) bool { return l == "x" }},
		{"total below done", 10, 3, "x", 10, 0, func(l string) bool { return l == "x" }},
		{"max", math.MaxInt64, math.MaxInt64, "x", math.MaxInt64, math.MaxInt64, func(l string) bool { return l == "x" }},
		{"empty label", 1, 2, "  ", 1, 2, func(l string) bool { return l == "Running rep" }},
		{"long label", 1, 2, long, 1, 2, func(l string) bool {
			return len(l) <= turn.MaxProgressLabel && utf8.ValidString(l) && strings.HasSuffix(l, "…") && strings.HasPrefix(l, "éé")
		}},
		{"invalid label", 1, 2, "a\xffb", 1, 2, func(l string) bool { return l == "a\uFFFDb" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := newProgressRecorder()
			rep := newTool(t, "rep", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
				tool.ReportProgress(ctx, tc.done, tc.total, tc.label)
				wctx, cancel := context.WithTimeout(ctx, waitLimit)
				defer cancel()
				obs.waitDone(wctx, math.MinInt64)
				return tool.Result{Content: "ok"}, nil
			}, readOnly)
			dispatch(t, context.Background(), &turn.Dispatcher{}, mustSet(t, rep), observe(obs, input(call("c1", "rep", `{}`))))
			events, _ := obs.snapshot()
			if len(events) != 1 {
				t.Fatalf("%d events, want 1", len(events))
			}
			p := events[0].Progress
			if p.Done != tc.wantDone {
				t.Errorf("done %d, want %d", p.Done, tc.wantDone)
			}
			switch {
			case tc.wantTotal == 0 && p.Total != nil:
				t.Errorf("total %d, want none", *p.Total)
			case tc.wantTotal != 0 && (p.Total == nil || *p.Total != tc.wantTotal):
				t.Errorf("total %v, want %d", p.Total, tc.wantTotal)
			}
			if !tc.check(events[0].Label) {
				t.Errorf("label %q", events[0].Label)
			}
		})
	}
}

// A Dispatcher whose observer does not publish progress gives calls no
// reporter: reports cost a context lookup and go nowhere.
func TestProgressWithoutProgressObserver(t *testing.T) {
	obs := newRecorder()
	rep := newTool(t, "rep", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		tool.ReportProgress(ctx, 1, 2, "x")
		return tool.Result{Content: "ok"}, nil
	}, readOnly)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, mustSet(t, rep), observe(obs, input(call("c1", "rep", `{}`))))
	if res.Outcomes[0].Err != nil {
		t.Fatal(res.Outcomes[0].Err.Message)
	}
}

// slowObserver blocks every progress publish until released, as a
// stalled connection would.
type slowObserver struct {
	*progressRecorder
	gate chan struct{}
}

func (s *slowObserver) CallProgress(ref turn.JournalRef, a protocol.Activity) {
	<-s.gate
	s.progressRecorder.CallProgress(ref, a)
}

// A publish that hangs does not slow the tool: its reports return while
// the publish waits, and the call's end waits for the publish under way,
// so its completed event still comes after the progress.
func TestProgressSlowPublishDoesNotBlockTool(t *testing.T) {
	obs := &slowObserver{progressRecorder: newProgressRecorder(), gate: make(chan struct{})}
	reported := make(chan struct{})
	rep := newTool(t, "rep", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		for i := int64(1); i <= 100_000; i++ {
			tool.ReportProgress(ctx, i, 0, "")
		}
		close(reported)
		return tool.Result{Content: "ok"}, nil
	}, readOnly)
	done := make(chan *turn.StepResult, 1)
	go func() {
		done <- (&turn.Dispatcher{}).Run(context.Background(), mustSet(t, rep), observe(obs, input(call("c1", "rep", `{}`))))
	}()
	select {
	case <-reported:
	case <-time.After(waitLimit):
		t.Fatal("the tool's reports waited for the stalled publish")
	}
	close(obs.gate)
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("the step never ended")
	}
	_, log := obs.snapshot()
	noProgressAfterEnd(t, log)
}

// BenchmarkReportProgress is the cost of one report in a tool's hot loop,
// with the dispatcher's reporter (rate-limited, publishing to an observer
// that drops the events) and with nobody listening.
func BenchmarkReportProgress(b *testing.B) {
	b.Run("reporter", func(b *testing.B) {
		obs := newProgressRecorder()
		hot := newTool(b, "hot", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			b.ReportAllocs()
			var i int64
			for b.Loop() {
				i++
				tool.ReportProgress(ctx, i, 0, "hot loop")
			}
			return tool.Result{Content: "ok"}, nil
		}, readOnly, withTimeout(time.Hour))
		res := (&turn.Dispatcher{}).Run(context.Background(), mustSet(b, hot), observe(obs, input(call("c1", "hot", `{}`))))
		if res.Outcomes[0].Err != nil {
			b.Fatal(res.Outcomes[0].Err.Message)
		}
	})
	b.Run("nobody", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		var i int64
		for b.Loop() {
			i++
			tool.ReportProgress(ctx, i, 0, "hot loop")
		}
	})
}

type nopObserver struct{}

func (nopObserver) CallStarted(turn.JournalRef, protocol.CallItem, string) {}
func (nopObserver) CallEnded(turn.JournalRef, *turn.Outcome)               {}

type nopProgressObserver struct{ nopObserver }

func (nopProgressObserver) CallProgress(turn.JournalRef, protocol.Activity) {}

// BenchmarkDispatchProgressReporter is what giving every call a progress
// reporter costs a step of eight no-op calls that never report: an
// observer without CallProgress against one with it.
func BenchmarkDispatchProgressReporter(b *testing.B) {
	noop := newTool(b, "noop", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		return tool.Result{Content: "ok"}, nil
	}, readOnly)
	set := mustSet(b, noop)
	calls := make([]protocol.CallItem, 8)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("call_%d", i), "noop", `{"text":"hello"}`)
	}
	in := turn.Input{AgentID: "a1", TurnID: "t1", Calls: calls}
	for _, bc := range []struct {
		name string
		obs  observer
	}{{"observer", nopObserver{}}, {"progress", nopProgressObserver{}}} {
		b.Run(bc.name, func(b *testing.B) {
			d := &turn.Dispatcher{Goroutines: turn.NewGoroutines(8)}
			in := observe(bc.obs, in)
			b.ReportAllocs()
			for b.Loop() {
				d.Run(context.Background(), set, in)
			}
		})
	}
}
