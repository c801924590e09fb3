package turn_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Consecutive parallel calls run at once: each waits at a barrier until
// all have started, which only works if they really are concurrent.
func TestParallelCallsRunConcurrently(t *testing.T) {
	b := newBarrier(3)
	set := mustSet(t,
		newTool(t, "p1", tool.Parallel, atBarrier(b, "one")),
		newTool(t, "p2", tool.Parallel, atBarrier(b, "two"), readOnly),
		newTool(t, "p3", tool.Parallel, atBarrier(b, "three"), readOnly),
	)
	d := &turn.Dispatcher{}
	res := dispatch(t, context.Background(), d, set, input(call("c1", "p1", `{}`), call("c2", "p2", `{}`), call("c3", "p3", `{}`)))
	for i, want := range []string{"one", "two", "three"} {
		if o := res.Outcomes[i]; o.Err != nil || output(t, o) != want {
			t.Errorf("call %d: %+v %v", i, o.Err, output(t, o))
		}
	}
}

// Every call of a parallel group runs beside the others, however the
// group's helpers take them: eight calls that each wait for all eight,
// on kept goroutines and on new ones, with quick calls between them
// that a helper runs one after the other.
func TestEveryCallOfAGroupRunsBesideTheOthers(t *testing.T) {
	for _, pool := range []*turn.Goroutines{nil, turn.NewGoroutines(8), turn.NewGoroutines(1)} {
		d := &turn.Dispatcher{Goroutines: pool, MaxParallel: 16}
		for round := range 20 {
			b := newBarrier(8)
			set := mustSet(t, newTool(t, "wait", tool.Parallel, atBarrier(b, "all"), readOnly),
				newTool(t, "quick", tool.Parallel, reply("quick"), readOnly))
			var calls []protocol.CallItem
			for i := range 8 {
				// The quick calls come first, between and last in turn.
				for range round % 3 {
					calls = append(calls, call(fmt.Sprintf("q%d-%d", i, len(calls)), "quick", ``))
				}
				calls = append(calls, call(fmt.Sprintf("w%d", i), "wait", ``))
			}
			for _, o := range dispatch(t, context.Background(), d, set, input(calls...)).Outcomes {
				if o.Err != nil {
					t.Fatalf("round %d, call %s: %v", round, o.CallID, o.Err)
				}
			}
		}
	}
}

// A call that runs nothing (here, an unknown tool) does not split a
// parallel group.
func TestParallelGroupSpansCallsThatRunNothing(t *testing.T) {
	b := newBarrier(2)
	set := mustSet(t,
		newTool(t, "p1", tool.Parallel, atBarrier(b, "one")),
		newTool(t, "p2", tool.Parallel, atBarrier(b, "two")),
	)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set,
		input(call("c1", "p1", `{}`), call("c2", "nope", `{}`), call("c3", "p2", `{"text":7}`), call("c4", "p2", `{}`)))
	want := []tool.Kind{"", tool.UnknownTool, tool.InvalidArguments, ""}
	for i, o := range res.Outcomes {
		if kind(o) != want[i] {
			t.Errorf("call %s: kind %q (%v), want %q", o.CallID, kind(o), o.Err, want[i])
		}
	}
}

func TestMaxParallelBoundsAGroup(t *testing.T) {
	var inflight, peak atomic.Int32
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	body := func(ctx context.Context, _ textArgs) (tool.Result, error) {
		n := inflight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		started <- struct{}{}
		defer inflight.Add(-1)
		select {
		case <-release:
			return tool.Result{Content: "ok"}, nil
		case <-ctx.Done():
			return tool.Result{}, ctx.Err()
		}
	}
	set := mustSet(t, newTool(t, "p", tool.Parallel, body))
	d := &turn.Dispatcher{MaxParallel: 2}
	done := make(chan *turn.StepResult, 1)
	in := input(call("c1", "p", ``), call("c2", "p", ``), call("c3", "p", ``), call("c4", "p", ``))
	go func() { done <- d.Run(context.Background(), set, in) }()
	for range 2 {
		select {
		case <-started:
		case <-time.After(waitLimit):
			t.Fatal("two calls did not start")
		}
	}
	close(release)
	res := <-done
	if p := peak.Load(); p > 2 {
		t.Errorf("%d calls ran at once, want at most MaxParallel 2", p)
	}
	for _, o := range res.Outcomes {
		if o.Err != nil {
			t.Errorf("call %s: %v", o.CallID, o.Err)
		}
	}
}

// A sequential call starts only after every earlier call has ended, and no
// later call starts before it ends. The parallel neighbours wait for each
// other at barriers so that they overlap for real.
func TestSequentialCallRunsAlone(t *testing.T) {
	var log eventLog
	before, after := newBarrier(2), newBarrier(2)
	set := mustSet(t,
		newTool(t, "before", tool.Parallel, logged(&log, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			return tool.Result{}, before.wait(ctx)
		})),
		newTool(t, "seq", tool.Sequential, logged(&log, reply("seq"))),
		newTool(t, "after", tool.Parallel, logged(&log, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			return tool.Result{}, after.wait(ctx)
		})),
	)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(
		call("p1", "before", ``), call("p2", "before", ``),
		call("s3", "seq", ``),
		call("s4", "seq", ``),
		call("p5", "after", ``), call("p6", "after", ``),
		call("s7", "seq", ``),
	))
	for _, o := range res.Outcomes {
		if o.Err != nil {
			t.Fatalf("call %s: %v", o.CallID, o.Err)
		}
	}
	ev := log.snapshot()
	assertBefore := func(a, b string) {
		t.Helper()
		if index(t, ev, a) > index(t, ev, b) {
			t.Errorf("%q happened after %q: %v", a, b, ev)
		}
	}
	// s3 after everything earlier ended; nothing later started before s3 ended.
	assertBefore("end p1", "start s3")
	assertBefore("end p2", "start s3")
	assertBefore("end s3", "start s4")
	assertBefore("end s4", "start p5")
	assertBefore("end s4", "start p6")
	assertBefore("end p5", "start s7")
	assertBefore("end p6", "start s7")
	// Each sequential call's start and end are adjacent: nothing else ran.
	for _, s := range []string{"s3", "s4", "s7"} {
		if index(t, ev, "end "+s) != index(t, ev, "start "+s)+1 {
			t.Errorf("something ran during %s: %v", s, ev)
		}
	}
}

// Outcomes come back in call order, whatever order the calls ended in:
// here each call waits until the call after it has ended.
func TestOutcomesInCallOrder(t *testing.T) {
	var log eventLog
	ended := map[string]chan struct{}{"c1": make(chan struct{}), "c2": make(chan struct{}), "c3": make(chan struct{})}
	next := map[string]string{"c1": "c2", "c2": "c3"}
	body := func(ctx context.Context, _ textArgs) (tool.Result, error) {
		c, _ := tool.CallFrom(ctx)
		defer close(ended[c.CallID])
		if n, ok := next[c.CallID]; ok {
			select {
			case <-ended[n]:
			case <-time.After(waitLimit):
				return tool.Result{}, errors.New("the later call never ended")
			}
		}
		return tool.Result{Content: "out " + c.CallID}, nil
	}
	set := mustSet(t, newTool(t, "p", tool.Parallel, logged(&log, body)))
	obs := newRecorder()
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set,
		observe(obs, input(call("c1", "p", ``), call("c2", "p", ``), call("c3", "p", ``))))
	for i, o := range res.Outcomes {
		if want := "out c" + string(rune('1'+i)); o.Err != nil || output(t, o) != want {
			t.Errorf("outcome %d = %q, %v; want %q", i, output(t, o), o.Err, want)
		}
	}
	items := res.Items()
	for i, o := range res.Outcomes {
		if string(items[i]) != string(o.Item) {
			t.Errorf("Items()[%d] is not outcome %d's item", i, i)
		}
	}
	if got := obs.endedIDs(); !slices.Equal(got, []string{"c1", "c2", "c3"}) {
		t.Errorf("observer heard of %v", got)
	}
}

func TestCallsThatCannotRun(t *testing.T) {
	var runs atomic.Int32
	count := func(ctx context.Context, p textArgs) (tool.Result, error) {
		runs.Add(1)
		return tool.Result{Content: "ran " + p.Text}, nil
	}
	set := mustSet(t,
		newTool(t, "echo", tool.Parallel, count),
		newTool(t, "lazy", tool.Parallel, count, deferred),
		newTool(t, "issues", tool.Parallel, count, deferred, inNamespace("github", "GitHub.")),
	)
	in := input(
		call("c1", "missing", `{}`),
		call("c2", "echo", `{"text":5}`),
		call("c3", "lazy", `{}`),
		nsCall("c4", "github", "issues", `{}`),
		call("c5", "issues", `{}`), // right name, wrong namespace
		nsCall("c6", "other", "echo", `{}`),
		call("c7", "echo", `{"text":"fine"}`),
	)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, in)
	want := []struct {
		kind tool.Kind
		text string
	}{
		{tool.UnknownTool, "There is no tool missing"},
		{tool.InvalidArguments, "- /text: "},
		{tool.NotLoaded, "The tool lazy is deferred"},
		{tool.NotLoaded, "The tool github.issues is deferred"},
		{tool.UnknownTool, "There is no tool issues"},
		{tool.UnknownTool, "There is no tool other.echo"},
		{"", "ran fine"},
	}
	for i, o := range res.Outcomes {
		if kind(o) != want[i].kind || !strings.Contains(output(t, o), want[i].text) {
			t.Errorf("call %s: kind %q, output %q; want %q containing %q", o.CallID, kind(o), output(t, o), want[i].kind, want[i].text)
		}
		if o.Err != nil && !strings.HasPrefix(output(t, o), "Error ("+string(o.Err.Kind)+"): ") {
			t.Errorf("call %s: output %q does not start with its error kind", o.CallID, output(t, o))
		}
		if o.Name != in.Calls[i].Name || o.Namespace != in.Calls[i].Namespace {
			t.Errorf("call %s: outcome names %s.%s", o.CallID, o.Namespace, o.Name)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs, want only c7", runs.Load())
	}

	// Once tool search has loaded them, the deferred tools run.
	in.Loaded = map[string]bool{turn.ToolKey("", "lazy"): true, turn.ToolKey("github", "issues"): true}
	res = dispatch(t, context.Background(), &turn.Dispatcher{}, set, in)
	if kind(res.Outcomes[2]) != "" || kind(res.Outcomes[3]) != "" {
		t.Errorf("loaded deferred tools: %v, %v", res.Outcomes[2].Err, res.Outcomes[3].Err)
	}
}

func TestRepairsReported(t *testing.T) {
	set := mustSet(t, newTool(t, "echo", tool.Parallel, reply("ok")))
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set,
		input(call("c1", "echo", "```json\n{\"text\":\"a\"}\n```"), call("c2", "echo", `{"text":"a"}`)))
	if got := res.Outcomes[0].Repairs(); !slices.Equal(got, []string{"strip_fences"}) {
		t.Errorf("repairs = %v", got)
	}
	if got := res.Outcomes[1].Repairs(); got != nil {
		t.Errorf("repairs of valid arguments = %v, want none", got)
	}

	// A refusal names the rungs that ran before it, too.
	res = dispatch(t, context.Background(), &turn.Dispatcher{}, set,
		input(call("c3", "echo", "```json\n{'text': 'a',\n```"), call("c4", "echo", `{"text": 3,}`)))
	if o := res.Outcomes[0]; kind(o) != tool.InvalidArguments || !slices.Equal(o.Repairs(), []string{"strip_fences", "single_quotes"}) {
		t.Errorf("cut-off refusal: %v, repairs %v", o.Err, o.Repairs())
	}
	if o := res.Outcomes[1]; kind(o) != tool.InvalidArguments || !slices.Equal(o.Repairs(), []string{"trailing_commas"}) {
		t.Errorf("schema refusal: %v, repairs %v", o.Err, o.Repairs())
	}
}

func TestTimeout(t *testing.T) {
	honest := func(ctx context.Context, _ textArgs) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}
	stuck := make(chan struct{})
	t.Cleanup(func() { close(stuck) })
	deaf := func(context.Context, textArgs) (tool.Result, error) {
		<-stuck // ignores its context
		return tool.Result{Content: "too late"}, nil
	}
	lying := func(ctx context.Context, _ textArgs) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{}, errors.New("connection reset")
	}
	set := mustSet(t,
		newTool(t, "honest", tool.Parallel, honest, withTimeout(50*time.Millisecond)),
		newTool(t, "deaf", tool.Parallel, deaf, withTimeout(50*time.Millisecond)),
		newTool(t, "lying", tool.Parallel, lying, withTimeout(50*time.Millisecond)),
		newTool(t, "dflt", tool.Parallel, honest), // the dispatcher's default
		newTool(t, "quick", tool.Parallel, reply("quick")),
	)
	obs := newRecorder()
	d := &turn.Dispatcher{Timeout: 80 * time.Millisecond}
	res := dispatch(t, context.Background(), d, set, observe(obs, input(
		call("c1", "honest", ``), call("c2", "deaf", ``), call("c3", "lying", ``), call("c4", "dflt", ``), call("c5", "quick", ``))))
	for i, limit := range []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond, 80 * time.Millisecond} {
		o := res.Outcomes[i]
		if kind(o) != tool.Timeout || !strings.Contains(o.Err.Message, limit.String()) {
			t.Errorf("call %s: %v, want a timeout after %s", o.CallID, o.Err, limit)
		}
		// The step's one timer serves every deadline: none ends early.
		if o.Duration < limit {
			t.Errorf("call %s ended after %s, before its %s limit", o.CallID, o.Duration, limit)
		}
		if !o.Ran {
			t.Errorf("call %s: Ran is false", o.CallID)
		}
	}
	if o := res.Outcomes[4]; o.Err != nil {
		t.Errorf("quick call: %v", o.Err)
	}
	if res.EndTurn || res.Abandoned {
		t.Errorf("EndTurn %v, Abandoned %v: a timeout ends only its call", res.EndTurn, res.Abandoned)
	}
	if got := obs.endedIDs(); len(got) != 5 {
		t.Errorf("observer heard of %v", got)
	}
}

// A tool that honours its context and returns what it had when stopped
// gets that partial output to the model with the timeout.
func TestTimeoutKeepsPartialOutput(t *testing.T) {
	set := mustSet(t, newTool(t, "tail", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		<-ctx.Done()
		return tool.Result{Content: "line 1\nline 2", Details: map[string]int{"lines": 2}}, ctx.Err()
	}, withTimeout(50*time.Millisecond)))
	for range 20 {
		res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(call("c1", "tail", ``)))
		o := res.Outcomes[0]
		if kind(o) != tool.Timeout || output(t, o) != "Error (timeout): The call did not finish within 50ms and was stopped.\nline 1\nline 2" || o.Details == nil {
			t.Fatalf("outcome %v, output %q, details %v", o.Err, output(t, o), o.Details)
		}
	}
}

func TestPanicIsToolError(t *testing.T) {
	set := mustSet(t,
		newTool(t, "boom", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) { panic("kaboom") }),
		newTool(t, "fail", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			return tool.Result{Content: "partial output"}, errors.New("exit status 2")
		}),
		newTool(t, "coded", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			return tool.Result{}, tool.Errorf(tool.InvalidArguments, "no such branch")
		}),
		newTool(t, "fine", tool.Sequential, reply("fine")),
	)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set,
		input(call("c1", "boom", ``), call("c2", "fail", ``), call("c3", "coded", ``), call("c4", "fine", ``)))
	if o := res.Outcomes[0]; kind(o) != tool.ToolError || !strings.Contains(output(t, o), "kaboom") {
		t.Errorf("panic: %v / %q", o.Err, output(t, o))
	}
	if d, _ := res.Outcomes[0].Details.(map[string]string); d["stack"] == "" {
		t.Errorf("panic details %v, want the stack", res.Outcomes[0].Details)
	}
	if o := res.Outcomes[1]; kind(o) != tool.ToolError || output(t, o) != "Error (tool_error): exit status 2\npartial output" {
		t.Errorf("error: %v / %q", o.Err, output(t, o))
	}
	if o := res.Outcomes[2]; kind(o) != tool.InvalidArguments {
		t.Errorf("coded error: %v", o.Err)
	}
	if o := res.Outcomes[3]; o.Err != nil || output(t, o) != "fine" {
		t.Errorf("the call after the failures: %v / %q", o.Err, output(t, o))
	}
}

func TestActivityLabels(t *testing.T) {
	set := mustSet(t, newTool(t, "echo", tool.Parallel, reply("x")),
		newTool(t, "bad", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) { return tool.Result{}, errors.New("no") }))
	obs := newRecorder()
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, observe(obs, input(call("c1", "echo", ``), call("c2", "bad", ``), call("c3", "nope", ``))))
	if obs.labels["c1"] != "Running echo" || res.Outcomes[0].Activity != "Running echo" || res.Outcomes[1].Activity != "Running bad" {
		t.Errorf("labels %v, outcome activities %q %q", obs.labels, res.Outcomes[0].Activity, res.Outcomes[1].Activity)
	}
	if _, ok := obs.labels["c3"]; ok {
		t.Error("a call that never started was reported started")
	}
	if !res.Outcomes[0].Ran || res.Outcomes[2].Ran {
		t.Errorf("Ran = %v, %v", res.Outcomes[0].Ran, res.Outcomes[2].Ran)
	}
}

// A tool that ends the turn lets the calls of its parallel group finish;
// the groups after it get aborted outcomes and never run.
func TestEndTurnLetsItsParallelGroupFinishAndAbortsLaterGroups(t *testing.T) {
	decided := make(chan struct{})
	var laterRuns atomic.Int32
	set := mustSet(t,
		newTool(t, "finish", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			close(decided)
			return tool.Result{Content: "done", EndTurn: true, CompleteActorEvent: true}, nil
		}),
		newTool(t, "slow", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			select { // still running after finish decided to end the turn
			case <-decided:
				return tool.Result{Content: "slow done"}, nil
			case <-ctx.Done():
				return tool.Result{}, ctx.Err()
			}
		}),
		newTool(t, "later", tool.Sequential, func(context.Context, textArgs) (tool.Result, error) {
			laterRuns.Add(1)
			return tool.Result{}, nil
		}),
		newTool(t, "laterp", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			laterRuns.Add(1)
			return tool.Result{}, nil
		}),
	)
	obs := newRecorder()
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, observe(obs, input(
		call("c1", "slow", ``), call("c2", "finish", ``), call("c3", "later", ``), call("c4", "laterp", ``), call("c5", "nope", ``))))
	if o := res.Outcomes[0]; o.Err != nil || output(t, o) != "slow done" {
		t.Errorf("the group neighbour: %v %q", o.Err, output(t, o))
	}
	if o := res.Outcomes[1]; o.Err != nil || !o.EndTurn || !o.Complete {
		t.Errorf("the ending call: %+v", o)
	}
	for _, o := range res.Outcomes[2:4] {
		if kind(o) != tool.Aborted || !strings.Contains(output(t, o), "call c2 (finish) ended the turn") {
			t.Errorf("call %s after the end: %v %q", o.CallID, o.Err, output(t, o))
		}
	}
	if kind(res.Outcomes[4]) != tool.UnknownTool {
		t.Errorf("an unknown tool keeps its own outcome: %v", res.Outcomes[4].Err)
	}
	if laterRuns.Load() != 0 {
		t.Errorf("%d calls ran after the turn ended", laterRuns.Load())
	}
	if !res.EndTurn || !res.CompleteActorEvent || res.Abandoned {
		t.Errorf("result EndTurn %v Complete %v Abandoned %v", res.EndTurn, res.CompleteActorEvent, res.Abandoned)
	}
	if got := obs.endedIDs(); len(got) != 5 {
		t.Errorf("observer heard of %v, want every call", got)
	}
}

func TestEndTurnFromASequentialCall(t *testing.T) {
	set := mustSet(t,
		newTool(t, "finish", tool.Sequential, func(context.Context, textArgs) (tool.Result, error) {
			return tool.Result{EndTurn: true}, nil
		}),
		newTool(t, "p", tool.Parallel, reply("p")),
	)
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(call("c1", "p", ``), call("c2", "finish", ``), call("c3", "p", ``)))
	got := []tool.Kind{kind(res.Outcomes[0]), kind(res.Outcomes[1]), kind(res.Outcomes[2])}
	if !slices.Equal(got, []tool.Kind{"", "", tool.Aborted}) || !res.EndTurn {
		t.Errorf("kinds %v, EndTurn %v", got, res.EndTurn)
	}
}

// The turn's abort (cause ErrCancelled) ends the running call and skips
// the rest; every call still gets an outcome and is reported and stored.
func TestTurnAbort(t *testing.T) {
	started := make(chan struct{})
	var laterRuns atomic.Int32
	set := mustSet(t,
		newTool(t, "first", tool.Parallel, reply("first")),
		newTool(t, "block", tool.Sequential, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			close(started)
			<-ctx.Done()
			return tool.Result{}, context.Cause(ctx)
		}),
		newTool(t, "later", tool.Sequential, func(context.Context, textArgs) (tool.Result, error) {
			laterRuns.Add(1)
			return tool.Result{}, nil
		}),
		newTool(t, "laterp", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			laterRuns.Add(1)
			return tool.Result{}, nil
		}, deferred),
	)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() {
		select {
		case <-started:
			cancel(turn.ErrCancelled)
		case <-time.After(waitLimit):
		}
	}()
	obs, j := newRecorder(), newJournal()
	in := input(call("c1", "first", ``), call("c2", "block", ``), call("c3", "later", ``), call("c4", "laterp", ``), searchCall("c5", `{"query":"later"}`))
	in.Loaded = map[string]bool{"laterp": true}
	res := dispatch(t, ctx, &turn.Dispatcher{Journal: j}, set, observe(obs, in))
	want := []tool.Kind{"", tool.Aborted, tool.Aborted, tool.Aborted, tool.Aborted}
	for i, o := range res.Outcomes {
		if kind(o) != want[i] {
			t.Errorf("call %s: kind %q (%v), want %q", o.CallID, kind(o), o.Err, want[i])
		}
	}
	if !strings.Contains(res.Outcomes[1].Err.Message, "cancelled") {
		t.Errorf("the running call's message %q does not say why", res.Outcomes[1].Err.Message)
	}
	if !strings.HasPrefix(res.Outcomes[2].Err.Message, "Not run") {
		t.Errorf("a skipped call's message %q does not say it did not run", res.Outcomes[2].Err.Message)
	}
	if res.Outcomes[4].Loaded() != nil {
		t.Errorf("a tool search after the abort loaded %v", res.Outcomes[4].Loaded())
	}
	if laterRuns.Load() != 0 {
		t.Errorf("%d calls started after the abort", laterRuns.Load())
	}
	if !res.EndTurn || res.Abandoned {
		t.Errorf("EndTurn %v, Abandoned %v; want true, false", res.EndTurn, res.Abandoned)
	}
	if got := obs.endedIDs(); !slices.Equal(got, []string{"c1", "c2", "c3", "c4", "c5"}) {
		t.Errorf("observer heard of %v, want every call", got)
	}
	// Both calls that ran are stored, so a redelivery does not run them again.
	if got := j.storedIDs(); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("journal stored %v", got)
	}
}

// A context that ends for another reason (the worker shutting down)
// abandons the step: the cut-short calls are neither reported nor stored,
// so that a redelivery decides their fate.
func TestAbandonedStep(t *testing.T) {
	started := make(chan struct{})
	set := mustSet(t,
		newTool(t, "first", tool.Sequential, reply("first")),
		newTool(t, "block", tool.Sequential, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			close(started)
			<-ctx.Done()
			return tool.Result{}, context.Cause(ctx)
		}),
		newTool(t, "later", tool.Parallel, reply("later")),
	)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	shutdown := errors.New("worker shutting down")
	go func() {
		select {
		case <-started:
			cancel(shutdown)
		case <-time.After(waitLimit):
		}
	}()
	obs, j := newRecorder(), newJournal()
	res := dispatch(t, ctx, &turn.Dispatcher{Journal: j}, set,
		observe(obs, input(call("c1", "first", ``), call("c2", "block", ``), call("c3", "later", ``), call("c4", "nope", ``))))
	if !res.Abandoned || !res.EndTurn {
		t.Errorf("Abandoned %v, EndTurn %v; want both", res.Abandoned, res.EndTurn)
	}
	// c4 (an unknown tool) is answered when its group is reached, after
	// the shutdown: not reported either.
	if got := obs.endedIDs(); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("observer heard of %v, want only c1, which ended before the shutdown", got)
	}
	if got := j.storedIDs(); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("journal stored %v, want only c1", got)
	}
	if kind(res.Outcomes[0]) != "" || kind(res.Outcomes[1]) != tool.Aborted || kind(res.Outcomes[2]) != tool.Aborted {
		t.Errorf("kinds %q %q %q", kind(res.Outcomes[0]), kind(res.Outcomes[1]), kind(res.Outcomes[2]))
	}
}

func TestJournal(t *testing.T) {
	var runs sync.Map // tool name → *atomic.Int32
	counted := func(name string) execFunc {
		n, _ := runs.LoadOrStore(name, new(atomic.Int32))
		return func(context.Context, textArgs) (tool.Result, error) {
			n.(*atomic.Int32).Add(1)
			return tool.Result{Content: "fresh " + name}, nil
		}
	}
	runsOf := func(name string) int32 {
		n, _ := runs.Load(name)
		return n.(*atomic.Int32).Load()
	}
	set := mustSet(t,
		newTool(t, "write", tool.Sequential, counted("write")),
		newTool(t, "read", tool.Parallel, counted("read"), readOnly),
	)

	t.Run("stored outcome replayed without running", func(t *testing.T) {
		j := newJournal()
		j.stored["c1"] = &turn.Outcome{CallID: "c1", Name: "write", Item: []byte(`{"type":"function_call_output","call_id":"c1","output":"stored"}`), EndTurn: true}
		obs := newRecorder()
		res := dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, observe(obs, input(call("c1", "write", ``), call("c2", "read", ``))))
		o := res.Outcomes[0]
		if !o.Replayed || o.Ran || output(t, o) != "stored" {
			t.Errorf("outcome %+v, want the stored one replayed", o)
		}
		if runsOf("write") != 0 {
			t.Error("the stored call ran again")
		}
		// The replayed outcome keeps its meaning: it ended the turn.
		if kind(res.Outcomes[1]) != tool.Aborted || !res.EndTurn {
			t.Errorf("after a replayed end of turn: %v, EndTurn %v", res.Outcomes[1].Err, res.EndTurn)
		}
		if len(obs.started) != 0 || len(obs.ended) != 2 {
			t.Errorf("observer: started %v, ended %v", obs.started, obs.endedIDs())
		}
	})
	t.Run("claimed non-read-only is interrupted without running", func(t *testing.T) {
		j := newJournal()
		j.claimed["c1"] = true
		res := dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, input(call("c1", "write", ``)))
		o := res.Outcomes[0]
		if kind(o) != tool.Interrupted || !strings.Contains(output(t, o), "not run again") {
			t.Errorf("outcome %v %q, want interrupted", o.Err, output(t, o))
		}
		if runsOf("write") != 0 {
			t.Error("an interrupted call ran again")
		}
		// Stored, so the next redelivery replays the same answer.
		res = dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, input(call("c1", "write", ``)))
		if o := res.Outcomes[0]; !o.Replayed || kind(o) != tool.Interrupted {
			t.Errorf("second redelivery: %+v", o)
		}
	})
	t.Run("claimed read-only runs again", func(t *testing.T) {
		j := newJournal()
		j.claimed["c1"] = true
		res := dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, input(call("c1", "read", ``)))
		if o := res.Outcomes[0]; o.Err != nil || !o.Ran || output(t, o) != "fresh read" {
			t.Errorf("outcome %+v, want a fresh run", o)
		}
		if runsOf("read") != 1 {
			t.Errorf("read ran %d times", runsOf("read"))
		}
	})
	t.Run("first attempt claims, runs and stores", func(t *testing.T) {
		j := newJournal()
		before := runsOf("write")
		res := dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, input(call("c1", "write", ``)))
		if o := res.Outcomes[0]; o.Err != nil || !j.claimed["c1"] || j.stored["c1"] != o {
			t.Errorf("outcome %+v, claimed %v, stored %v", o, j.claimed, j.stored)
		}
		if runsOf("write") != before+1 {
			t.Error("write did not run once")
		}
	})
	t.Run("claim failure is internal and runs nothing", func(t *testing.T) {
		j := newJournal()
		j.failing = errors.New("kv unavailable")
		before := runsOf("write")
		res := dispatch(t, context.Background(), &turn.Dispatcher{Journal: j}, set, input(call("c1", "write", ``)))
		if o := res.Outcomes[0]; kind(o) != tool.Internal || !strings.Contains(o.Err.Message, "kv unavailable") {
			t.Errorf("outcome %v", o.Err)
		}
		if runsOf("write") != before {
			t.Error("the call ran without a claim")
		}
	})
}

func TestCallIdentityReachesTheTool(t *testing.T) {
	var got tool.Call
	set := mustSet(t, newTool(t, "who", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		got, _ = tool.CallFrom(ctx)
		return tool.Result{}, nil
	}))
	dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(call("call-9", "who", ``)))
	if want := (tool.Call{AgentID: "a1", TurnID: "t1", Step: 3, CallID: "call-9"}); got != want {
		t.Errorf("CallFrom = %+v, want %+v", got, want)
	}
}

func TestEmptyStep(t *testing.T) {
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, mustSet(t), input())
	if len(res.Outcomes) != 0 || len(res.Items()) != 0 || res.EndTurn {
		t.Errorf("result %+v", res)
	}
}

func TestOutcomeStatus(t *testing.T) {
	if (&turn.Outcome{}).Status() != protocol.StatusOK || (&turn.Outcome{Err: &tool.Error{Kind: tool.Timeout}}).Status() != protocol.StatusError {
		t.Error("Status does not follow Err")
	}
}

// slowJournal holds every claim until the test lets it through.
type slowJournal struct {
	*memJournal
	claiming, release chan struct{}
}

func (j *slowJournal) Claim(ctx context.Context, ref turn.JournalRef) (*turn.Outcome, error) {
	close(j.claiming)
	<-j.release
	return j.memJournal.Claim(ctx, ref)
}

// TestCancelDuringClaim: a turn cancelled while a call's claim is on its
// way does not run the call, which is answered aborted, and that outcome
// is stored for a redelivery.
func TestCancelDuringClaim(t *testing.T) {
	var ran atomic.Bool
	set := mustSet(t, newTool(t, "act", tool.Sequential, func(context.Context, textArgs) (tool.Result, error) {
		ran.Store(true)
		return tool.Result{Content: "did it"}, nil
	}))
	j := &slowJournal{memJournal: newJournal(), claiming: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-j.claiming
		cancel(turn.ErrCancelled)
		close(j.release)
	}()
	o := dispatch(t, ctx, &turn.Dispatcher{Journal: j}, set, input(call("c1", "act", ``))).Outcomes[0]
	if ran.Load() || kind(o) != tool.Aborted {
		t.Fatalf("tool ran: %v; outcome %v, want aborted and not run", ran.Load(), o.Err)
	}
	if ids := j.storedIDs(); !slices.Equal(ids, []string{"c1"}) {
		t.Fatalf("stored %v, want the aborted outcome of c1", ids)
	}
}

// reuseJournal is a memJournal that holds the ids in reused for other
// calls; like turnstate's, its check fails on a context that ended.
type reuseJournal struct {
	*memJournal
	reused map[string]bool
}

func (j reuseJournal) ReusedIDs(ctx context.Context, _ []turn.JournalRef) (map[string]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return j.reused, nil
}

// TestReuseCheckedOnAnAbortedTurn: a step run on a cancelled turn (held
// calls decided by the cancel) still checks its unrun calls' ids, whose
// outcomes would otherwise go out under the first version's message ids;
// the check failed on the turn's ended context, with a warning per step.
func TestReuseCheckedOnAnAbortedTurn(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(turn.ErrCancelled)
	j := reuseJournal{memJournal: newJournal(), reused: map[string]bool{"c1": true}}
	o := dispatch(t, ctx, &turn.Dispatcher{Journal: j}, mustSet(t), input(call("c1", "gone", `{}`))).Outcomes[0]
	if !o.Reused {
		t.Fatalf("outcome %v, want answered as a reused call id", o.Err)
	}
}
