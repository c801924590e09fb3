package turn_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/tool"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.Bytes

// waitLimit bounds every wait in these tests: a broken ordering shows up
// as a failure after it, never as a hung test binary.
const waitLimit = 10 * time.Second

// textArgs is the parameter type of most test tools.
type textArgs struct {
	Text string `json:"text,omitempty"`
}

type execFunc func(ctx context.Context, p textArgs) (tool.Result, error)

// newTool defines a test tool; opts adjust its spec.
func newTool(t testing.TB, name string, mode tool.Mode, exec execFunc, opts ...func(*tool.Spec)) *tool.Tool {
	t.Helper()
	s := tool.Spec{Name: name, Description: "Test tool " + name + ".", ExecutionMode: mode}
	for _, o := range opts {
		o(&s)
	}
	tool, err := tool.New(tool.Def[textArgs]{
		Spec:     s,
		Activity: func(p textArgs) string { return "Running " + name },
		Execute:  exec,
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

func readOnly(s *tool.Spec) { s.ReadOnly = true }

func deferred(s *tool.Spec) { s.DeferLoading = true }

func inNamespace(ns, desc string) func(*tool.Spec) {
	return func(s *tool.Spec) { s.Namespace, s.NamespaceDescription = ns, desc }
}

func withTimeout(d time.Duration) func(*tool.Spec) {
	return func(s *tool.Spec) { s.Timeout = d }
}

func describe(d string) func(*tool.Spec) {
	return func(s *tool.Spec) { s.Description = d }
}

func reply(text string) execFunc {
	return func(context.Context, textArgs) (tool.Result, error) { return tool.Result{Content: text}, nil }
}

func call(id, name, args string) protocol.CallItem {
	return protocol.CallItem{Type: protocol.ItemFunctionCall, CallID: id, Name: name, Arguments: args}
}

func nsCall(id, ns, name, args string) protocol.CallItem {
	c := call(id, name, args)
	c.Namespace = ns
	return c
}

func searchCall(id, args string) protocol.CallItem {
	c := protocol.CallItem{Type: protocol.ItemToolSearchCall, CallID: id, Execution: "client"}
	if args != "" {
		c.Search = json.RawMessage(args)
	}
	return c
}

func mustSet(t testing.TB, ts ...*tool.Tool) *turn.Set {
	t.Helper()
	s, err := turn.NewSet(ts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func input(calls ...protocol.CallItem) turn.Input {
	return turn.Input{AgentID: "a1", TurnID: "t1", Step: 3, Calls: calls}
}

// dispatch runs d over the step, failing the test if it does not return
// within waitLimit.
func dispatch(t *testing.T, ctx context.Context, d *turn.Dispatcher, set *turn.Set, in turn.Input) *turn.StepResult {
	t.Helper()
	done := make(chan *turn.StepResult, 1)
	go func() { done <- d.Run(ctx, set, in) }()
	select {
	case r := <-done:
		if len(r.Outcomes) != len(in.Calls) {
			t.Fatalf("%d outcomes for %d calls", len(r.Outcomes), len(in.Calls))
		}
		for i, o := range r.Outcomes {
			if o == nil {
				t.Fatalf("call %d has no outcome", i)
			}
			if o.CallID != in.Calls[i].CallID {
				t.Fatalf("outcome %d is for call %s, want %s: outcomes are out of call order", i, o.CallID, in.Calls[i].CallID)
			}
		}
		return r
	case <-time.After(3 * waitLimit):
		t.Fatal("Dispatcher.Run did not return")
		return nil
	}
}

// kind is the error kind of an outcome, "" when it succeeded.
func kind(o *turn.Outcome) tool.Kind {
	if o.Err == nil {
		return ""
	}
	return o.Err.Kind
}

// output decodes a function_call_output item's text.
func output(t *testing.T, o *turn.Outcome) string {
	t.Helper()
	var item protocol.FunctionCallOutput
	if err := json.Unmarshal(o.Item, &item); err != nil {
		t.Fatalf("item %s: %v", o.Item, err)
	}
	if item.Type != protocol.ItemFunctionCallOutput || item.CallID != o.CallID {
		t.Fatalf("item %s does not answer call %s", o.Item, o.CallID)
	}
	return item.Output
}

// eventLog records start and end events from concurrent tools.
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
}

func (l *eventLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// index returns where e is in the log, failing when it is missing.
func index(t *testing.T, events []string, e string) int {
	t.Helper()
	i := slices.Index(events, e)
	if i < 0 {
		t.Fatalf("event %q missing from %v", e, events)
	}
	return i
}

// logged wraps a tool body with start and end events named by call id.
func logged(l *eventLog, body execFunc) execFunc {
	return func(ctx context.Context, p textArgs) (tool.Result, error) {
		c, _ := tool.CallFrom(ctx)
		l.add("start %s", c.CallID)
		defer l.add("end %s", c.CallID)
		return body(ctx, p)
	}
}

// barrier lets n tools wait until all n have started.
type barrier struct {
	mu      sync.Mutex
	n       int
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

// wait returns once n callers have arrived, or an error after waitLimit
// or when ctx ends: calls that were not run together fail instead of
// hanging.
func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("barrier: %w", context.Cause(ctx))
	case <-time.After(waitLimit):
		return fmt.Errorf("barrier: only %d of %d calls ran together", b.count(), b.n)
	}
}

func (b *barrier) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived
}

func atBarrier(b *barrier, content string) execFunc {
	return func(ctx context.Context, _ textArgs) (tool.Result, error) {
		if err := b.wait(ctx); err != nil {
			return tool.Result{}, err
		}
		return tool.Result{Content: content}, nil
	}
}

// recorder is an observer that keeps what it was told.
type recorder struct {
	mu      sync.Mutex
	started []string
	labels  map[string]string
	ended   map[string]*turn.Outcome
	order   []string
}

func newRecorder() *recorder {
	return &recorder{labels: map[string]string{}, ended: map[string]*turn.Outcome{}}
}

func (r *recorder) CallStarted(ref turn.JournalRef, c protocol.CallItem, label string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, c.CallID)
	r.labels[c.CallID] = label
}

func (r *recorder) CallEnded(ref turn.JournalRef, o *turn.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.ended[ref.CallID]; dup {
		panic("call ended twice: " + ref.CallID)
	}
	r.ended[ref.CallID] = o
	r.order = append(r.order, ref.CallID)
}

func (r *recorder) endedIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := slices.Clone(r.order)
	slices.Sort(ids)
	return ids
}

// memJournal is an in-memory Journal.
type memJournal struct {
	mu      sync.Mutex
	stored  map[string]*turn.Outcome
	claimed map[string]bool
	failing error // returned by Claim when set
	stores  []string
}

func newJournal() *memJournal {
	return &memJournal{stored: map[string]*turn.Outcome{}, claimed: map[string]bool{}}
}

func (j *memJournal) Claim(_ context.Context, ref turn.JournalRef) (*turn.Outcome, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.failing != nil {
		return nil, j.failing
	}
	if o, ok := j.stored[ref.CallID]; ok {
		// What the worker reads back: a JSON round trip.
		b, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var back turn.Outcome
		if err := json.Unmarshal(b, &back); err != nil {
			return nil, err
		}
		return &back, nil
	}
	if j.claimed[ref.CallID] {
		return nil, turn.ErrClaimed
	}
	j.claimed[ref.CallID] = true
	return nil, nil
}

func (j *memJournal) Store(ctx context.Context, ref turn.JournalRef, o *turn.Outcome) error {
	if ctx.Err() != nil {
		return fmt.Errorf("store with a dead context: %w", ctx.Err())
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stored[ref.CallID] = o
	j.stores = append(j.stores, ref.CallID)
	return nil
}

func (j *memJournal) storedIDs() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := slices.Clone(j.stores)
	slices.Sort(ids)
	return ids
}

// observer is what the tests' recorders implement; a recorder that also
// has CallProgress publishes progress.
type observer interface {
	CallStarted(turn.JournalRef, protocol.CallItem, string)
	CallEnded(turn.JournalRef, *turn.Outcome)
}

// observe gives in the hooks of o.
func observe(o observer, in turn.Input) turn.Input {
	in.Hooks = &turn.Hooks{Started: o.CallStarted, Ended: o.CallEnded}
	if p, ok := o.(interface {
		CallProgress(turn.JournalRef, protocol.Activity)
	}); ok {
		in.Hooks.Progress = p.CallProgress
	}
	return in
}
