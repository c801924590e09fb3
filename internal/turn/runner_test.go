package turn_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// fakeEmitter records events.
type fakeEmitter struct {
	mu       sync.Mutex
	outputs  []*protocol.CallOutput
	done     []*protocol.StepDone
	activity []protocol.Activity
	fail     error
}

func (e *fakeEmitter) CallOutput(ctx context.Context, ev *protocol.CallOutput) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outputs = append(e.outputs, ev)
	return e.fail
}

func (e *fakeEmitter) StepDone(_ context.Context, ev *protocol.StepDone) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.done = append(e.done, ev)
	return nil
}

func (e *fakeEmitter) Activity(_, _ string, a protocol.Activity) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.activity = append(e.activity, a)
}

func (e *fakeEmitter) output(id string) *protocol.CallOutput {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, o := range e.outputs {
		if o.CallID == id {
			return o
		}
	}
	return nil
}

// fakeState is an in-memory State.
type fakeState struct {
	mu        sync.Mutex
	cancelled map[string]string
	loaded    map[string]map[string]bool
}

func newState() *fakeState {
	return &fakeState{cancelled: map[string]string{}, loaded: map[string]map[string]bool{}}
}

func (s *fakeState) Cancelled(_ context.Context, agentID, turnID string) (bool, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.cancelled[agentID+"."+turnID]
	return ok, r, nil
}

func (s *fakeState) Loaded(_ context.Context, agentID, turnID string) (map[string]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]bool{}
	for k := range s.loaded[agentID+"."+turnID] {
		out[k] = true
	}
	return out, nil
}

func (s *fakeState) AddLoaded(_ context.Context, agentID, turnID string, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := agentID + "." + turnID
	if s.loaded[k] == nil {
		s.loaded[k] = map[string]bool{}
	}
	for _, key := range keys {
		s.loaded[k][key] = true
	}
	return nil
}

func step(n int64, calls ...protocol.CallItem) *protocol.Step {
	return &protocol.Step{AgentID: "a1", TurnID: "t1", Step: n, Context: protocol.Context{Kind: protocol.KindText}, Calls: calls}
}

func newRunner(t *testing.T, ts ...*tool.Tool) (*turn.Runner, *fakeEmitter, *fakeState) {
	t.Helper()
	em, st := &fakeEmitter{}, newState()
	r := &turn.Runner{
		Assembler: turn.NewAssembler(category("", ts...)),
		Emitter:   em,
		State:     st,
		Cancels:   turn.NewCancels(),
	}
	return r, em, st
}

func TestRunnerStep(t *testing.T) {
	var runs atomic.Int32
	r, em, st := newRunner(t,
		newTool(t, "echo", tool.Parallel, func(_ context.Context, p textArgs) (tool.Result, error) {
			runs.Add(1)
			return tool.Result{Content: "echo " + p.Text, Events: []protocol.PresentationEvent{{Type: "note"}}}, nil
		}),
		newTool(t, "mail", "", reply("sent"), deferred, describe("Send an email.")),
	)
	err := r.Run(context.Background(), step(0,
		call("c1", "echo", "```\n{\"text\":\"hi\"}\n```"),
		searchCall("c2", `{"query":"email"}`),
		call("c3", "nope", `{}`),
	))
	if err != nil {
		t.Fatal(err)
	}
	if len(em.done) != 1 {
		t.Fatalf("%d step.done events", len(em.done))
	}
	done := em.done[0]
	if done.Type != protocol.EventStepDone || done.EndTurn || len(done.Items) != 3 {
		t.Errorf("step.done %+v", done)
	}
	for i, id := range []string{"c1", "c2", "c3"} {
		var item struct {
			CallID string `json:"call_id"`
		}
		json.Unmarshal(done.Items[i], &item)
		if item.CallID != id {
			t.Errorf("item %d answers %s, want %s", i, item.CallID, id)
		}
	}
	c1 := em.output("c1")
	if c1 == nil || c1.Status != protocol.StatusOK || c1.Error != nil || !slices.Equal(c1.Repairs, []string{"strip_fences"}) ||
		len(c1.Events) != 1 || c1.Activity != "Running echo" || c1.Type != protocol.EventCallOutput || c1.Step != 0 {
		t.Errorf("call.output c1 %+v", c1)
	}
	c3 := em.output("c3")
	if c3 == nil || c3.Status != protocol.StatusError || c3.Error.Kind != tool.UnknownTool || c3.Repairs == nil || c3.Events == nil || c3.Details == nil {
		t.Errorf("call.output c3 %+v (repairs, events and details must marshal as empty, not null)", c3)
	}
	if loaded, _ := st.Loaded(context.Background(), "a1", "t1"); !loaded["mail"] {
		t.Errorf("the search did not record its loaded tools: %v", loaded)
	}
	var states []string
	for _, a := range em.activity {
		states = append(states, a.CallID+":"+a.State)
	}
	if !slices.Equal(states, []string{"c1:started", "c1:completed"}) {
		t.Errorf("activity %v", states)
	}

	// The next step of the turn can call the loaded tool.
	if err := r.Run(context.Background(), step(1, call("c4", "mail", `{}`))); err != nil {
		t.Fatal(err)
	}
	if o := em.output("c4"); o == nil || o.Error != nil {
		t.Errorf("call.output c4 %+v", o)
	}
}

func TestRunnerEmptyStepEndsTheTurn(t *testing.T) {
	r, em, _ := newRunner(t)
	if err := r.Run(context.Background(), step(0)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(em.done[0])
	var got struct {
		Items   json.RawMessage `json:"items"`
		EndTurn bool            `json:"end_turn"`
	}
	json.Unmarshal(b, &got)
	if string(got.Items) != "[]" || !got.EndTurn {
		t.Errorf("step.done %s, want items [] and end_turn true", b)
	}
}

// A step of a turn already marked cancelled runs nothing: every call,
// tool search included, is answered aborted, and the turn ends.
func TestRunnerCancelledTurnRunsNothing(t *testing.T) {
	var runs atomic.Int32
	r, em, st := newRunner(t,
		newTool(t, "echo", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			runs.Add(1)
			return tool.Result{}, nil
		}),
		newTool(t, "mail", "", reply("sent"), deferred, describe("Send an email.")),
	)
	st.cancelled["a1.t1"] = "user pressed stop"
	if err := r.Run(context.Background(), step(2, call("c1", "echo", `{}`), searchCall("c2", `{"query":"email"}`))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		o := em.output(id)
		if o == nil || o.Error == nil || o.Error.Kind != tool.Aborted {
			t.Errorf("call.output %s %+v, want aborted", id, o)
		}
	}
	if runs.Load() != 0 {
		t.Error("a call of a cancelled turn ran")
	}
	if loaded, _ := st.Loaded(context.Background(), "a1", "t1"); len(loaded) != 0 {
		t.Errorf("a cancelled turn loaded %v", loaded)
	}
	if len(em.done) != 1 || !em.done[0].EndTurn {
		t.Errorf("step.done %+v, want end_turn", em.done)
	}
}

func TestRunnerCancelReachesRunningCalls(t *testing.T) {
	started := make(chan struct{})
	r, em, _ := newRunner(t, newTool(t, "block", tool.Sequential, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}))
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background(), step(0, call("c1", "block", ``), call("c2", "block", ``))) }()
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("the call did not start")
	}
	r.Cancels.Cancel("a1", "other-turn", "")
	r.Cancels.Cancel("a1", "t1", "user pressed stop")
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitLimit):
		t.Fatal("the step did not end after the cancel")
	}
	for _, id := range []string{"c1", "c2"} {
		if o := em.output(id); o == nil || o.Error == nil || o.Error.Kind != tool.Aborted {
			t.Errorf("call.output %s %+v, want aborted", id, o)
		}
	}
	if !em.done[0].EndTurn {
		t.Error("step.done after a cancel does not end the turn")
	}
}

func TestRunnerAbandonedStepReportsNothing(t *testing.T) {
	started := make(chan struct{})
	r, em, _ := newRunner(t, newTool(t, "block", tool.Sequential, func(ctx context.Context, _ textArgs) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	}))
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		select {
		case <-started:
			cancel(errors.New("shutting down"))
		case <-time.After(waitLimit):
		}
	}()
	err := r.Run(ctx, step(0, call("c1", "block", ``)))
	if !errors.Is(err, turn.ErrAbandoned) {
		t.Errorf("Run = %v, want ErrAbandoned", err)
	}
	if len(em.outputs) != 0 || len(em.done) != 0 {
		t.Errorf("an abandoned step published %d outputs and %d step.done", len(em.outputs), len(em.done))
	}
}

func TestRunnerPublishFailure(t *testing.T) {
	r, em, _ := newRunner(t, newTool(t, "echo", tool.Parallel, reply("x")))
	em.fail = errors.New("stream full")
	err := r.Run(context.Background(), step(0, call("c1", "echo", ``)))
	if err == nil || !errors.Is(err, em.fail) {
		t.Errorf("Run = %v, want the publish error", err)
	}
	if len(em.done) != 0 {
		t.Error("step.done was published after a call.output failed")
	}
}

// Steps that come with one context share one registration on it: a step
// that starts after that context ended, while another step of it still
// runs (a tool that ignores its context holds it), is abandoned at once
// all the same, and so is the one running.
func TestRunnerParentEndedWhileAStepRuns(t *testing.T) {
	started, ended, hold := make(chan struct{}, 2), make(chan struct{}, 2), make(chan struct{})
	defer close(hold)
	r, em, _ := newRunner(t,
		newTool(t, "stubborn", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
			started <- struct{}{}
			<-hold
			return tool.Result{}, nil
		}),
		newTool(t, "block", tool.Parallel, func(ctx context.Context, _ textArgs) (tool.Result, error) {
			started <- struct{}{}
			<-ctx.Done()
			ended <- struct{}{}
			return tool.Result{}, ctx.Err()
		}))
	ctx, cancel := context.WithCancelCause(context.Background())
	first := make(chan error, 1)
	go func() {
		first <- r.Run(ctx, &protocol.Step{AgentID: "a1", TurnID: "t1", Context: protocol.Context{Kind: protocol.KindText},
			Calls: []protocol.CallItem{call("c1", "stubborn", ``), call("c2", "block", ``)}})
	}()
	for range 2 {
		select {
		case <-started:
		case <-time.After(waitLimit):
			t.Fatal("the first step's calls did not start")
		}
	}
	cancel(errors.New("shutting down"))
	select { // the first step was aborted; it still runs
	case <-ended:
	case <-time.After(waitLimit):
		t.Fatal("the first step's call did not end with its context")
	}
	second := make(chan error, 1)
	go func() {
		second <- r.Run(ctx, &protocol.Step{AgentID: "a1", TurnID: "t2", Context: protocol.Context{Kind: protocol.KindText},
			Calls: []protocol.CallItem{call("c3", "block", ``)}})
	}()
	for name, errc := range map[string]chan error{"first": first, "second": second} {
		select {
		case err := <-errc:
			if !errors.Is(err, turn.ErrAbandoned) {
				t.Errorf("%s step: Run = %v, want ErrAbandoned", name, err)
			}
		case <-time.After(waitLimit):
			t.Fatalf("the %s step did not end after its context did", name)
		}
	}
	em.mu.Lock()
	defer em.mu.Unlock()
	if len(em.done) != 0 {
		t.Errorf("abandoned steps published %d step.done", len(em.done))
	}
}
