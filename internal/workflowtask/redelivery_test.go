package workflowtask_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// recorder is an Emitter and an EventPublisher that keeps what it is
// given, so a test can see what each attempt at a step reported, duplicates
// included (the streams would drop them by message id).
type recorder struct {
	mu       sync.Mutex
	outputs  []*protocol.CallOutput
	done     []*protocol.StepDone
	eventIDs []string
}

func (r *recorder) CallOutput(_ context.Context, ev *protocol.CallOutput) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outputs = append(r.outputs, ev)
	return nil
}

func (r *recorder) StepDone(_ context.Context, ev *protocol.StepDone) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = append(r.done, ev)
	return nil
}

func (r *recorder) Activity(string, string, protocol.Activity) {}

func (r *recorder) Event(_ context.Context, _, msgID string, _ any) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eventIDs = append(r.eventIDs, msgID)
	return nil
}

// attempt runs one delivery of a step through Run, with the TURN_STATE
// journal a worker uses, and returns what it reported.
func attempt(t *testing.T, h *harness, c protocol.Context, turnID string, step int64, output ...json.RawMessage) *recorder {
	t.Helper()
	ctx := context.Background()
	kv, err := h.js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	state := &turnstate.Store{KV: kv, Pub: &bus.Publisher{JS: h.js}, Worker: "test"}
	rec := &recorder{}
	r := &turn.Runner{Dispatcher: turn.Dispatcher{Journal: state}, Emitter: rec, State: state}
	svc := workflowtask.New(h.js, workflowtask.Config{Events: rec, Logger: workertest.Logger()})
	if output == nil {
		output = []json.RawMessage{}
	}
	body := mustJSON(map[string]any{"agent_id": agent, "turn_id": turnID, "step": step, "context": c, "output": output})
	st, err := protocol.ParseStep(protocol.PrefixTask, protocol.Subject(protocol.PrefixTask, agent, turnID), body, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Run(ctx, r, st); err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rec
}

func TestRedeliveredCommitReportsTheSame(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]
	c := taskContext(wf, "q1")

	step := []json.RawMessage{submit("c1", map[string]any{"answer": "a", "confidence": 1}), call("c2", "web_search", map[string]any{"query": "x"})}
	first := attempt(t, h, c, turnID, 0, step...)
	rec, _ := h.task(wf, "q1")
	second := attempt(t, h, c, turnID, 0, step...)

	if again, _ := h.task(wf, "q1"); again.Revision != rec.Revision {
		t.Errorf("the redelivery wrote the task again: revision %d, was %d", again.Revision, rec.Revision)
	}
	for i, a := range []*recorder{first, second} {
		if len(a.done) != 1 || a.done[0].Task.Status != protocol.VerdictAccepted || !a.done[0].EndTurn {
			t.Fatalf("attempt %d: step.done %+v", i+1, a.done)
		}
		if len(a.outputs) != 2 || a.outputs[0].Status != protocol.StatusOK {
			t.Fatalf("attempt %d: outputs %+v", i+1, a.outputs)
		}
	}
	if string(mustJSON(first.done[0])) != string(mustJSON(second.done[0])) {
		t.Errorf("step.done differs:\n%s\n%s", mustJSON(first.done[0]), mustJSON(second.done[0]))
	}
	if string(first.outputs[0].Item) != string(second.outputs[0].Item) {
		t.Errorf("submit_result answered differently:\n%s\n%s", first.outputs[0].Item, second.outputs[0].Item)
	}
	// Both attempts report the end under the same ids; the stream keeps one.
	want := []string{wf + ".q1.accepted", wf + ".completed"}
	if !slices.Equal(first.eventIDs, want) || !slices.Equal(second.eventIDs, want) {
		t.Errorf("event ids %v then %v, want %v", first.eventIDs, second.eventIDs, want)
	}

	// A later step is answered from the record, and reports nothing again.
	later := attempt(t, h, c, turnID, 1, submit("c3", map[string]any{"answer": "b", "confidence": 0}))
	if len(later.eventIDs) != 0 || later.outputs[0].Error == nil || later.outputs[0].Error.Kind != tool.Aborted {
		t.Errorf("later step: events %v, output %+v", later.eventIDs, later.outputs)
	}
}

func TestCrashAfterCommitStillAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]
	c := taskContext(wf, "q1")

	step := submit("c1", map[string]any{"answer": "a", "confidence": 1})
	attempt(t, h, c, turnID, 0, step)
	// The attempt died after the commit but before its outcome was stored:
	// the journal holds only the claim.
	kv, err := h.js.KeyValue(context.Background(), protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), protocol.CallKey(agent, turnID, 0, "c1"), []byte(`{"state":"claimed","worker":"dead"}`)); err != nil {
		t.Fatal(err)
	}
	second := attempt(t, h, c, turnID, 0, step)
	if out := second.outputs[0]; out.Error == nil || out.Error.Kind != tool.Interrupted {
		t.Errorf("output %+v, want interrupted (never run twice)", out)
	}
	v := second.done[0].Task
	if v.Status != protocol.VerdictAccepted || string(v.Result) != `{"answer":"a","confidence":1}` || !second.done[0].EndTurn {
		t.Errorf("verdict %+v", v)
	}
	if !slices.Contains(second.eventIDs, wf+".q1.accepted") {
		t.Errorf("the redelivery did not finish reporting: %v", second.eventIDs)
	}
}
