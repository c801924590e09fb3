package workflowtask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// The service is what the worker serves task turns with.
var _ engine.TaskTurns = (*workflowtask.Service)(nil)

const (
	agent    = "agent1"
	mainTurn = "main1"
	wait     = 15 * time.Second
)

type queryParams struct {
	Query string `json:"query" jsonschema:"description=What to look for."`
}

// fakeCategory stands in for a category that comes in a later issue: it
// returns its tools when its binding is set and counts their runs.
type fakeCategory struct {
	binding string
	tools   []*tool.Tool
	runs    atomic.Int64
}

func newFakeCategory(binding string, specs ...tool.Spec) *fakeCategory {
	c := &fakeCategory{binding: binding}
	for _, sp := range specs {
		c.tools = append(c.tools, tool.Must(tool.Def[queryParams]{
			Spec: sp,
			Execute: func(_ context.Context, p queryParams) (tool.Result, error) {
				c.runs.Add(1)
				return tool.Result{Content: sp.Name + " found nothing for " + p.Query}, nil
			},
		}))
	}
	return c
}

func (c *fakeCategory) category() tool.Category { return tool.NewCategory(c.binding, c.tools...) }

func webCategory() *fakeCategory {
	return newFakeCategory("web",
		tool.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true},
		tool.Spec{Name: "web_fetch", Description: "Fetch a web page.", ReadOnly: true},
	)
}

// brainCategory has more than recall and get_page, and a writing tool, so
// that the task catalog's filter shows.
func brainCategory() *fakeCategory {
	return newFakeCategory("brain",
		tool.Spec{Name: "remember", Description: "Store a memory."},
		tool.Spec{Name: "get_page", Description: "Read a page of the brain.", ReadOnly: true},
		tool.Spec{Name: "recall", Description: "Recall memories.", ReadOnly: true},
		tool.Spec{Name: "forget", Description: "Forget a memory.", Destructive: true},
	)
}

// harness is one embedded server with the categories its workers use.
type harness struct {
	t       *testing.T
	srv     *natstest.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	web     *fakeCategory
	brain   *fakeCategory
	markDir string
	outputs map[string]*turnOutputs
	// approval is the workers' approval policy (none by default).
	approval turn.Policy
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, srv: natstest.Start(t), web: webCategory(), brain: brainCategory(), markDir: t.TempDir(), outputs: map[string]*turnOutputs{}}
	h.nc = h.srv.Connect(t)
	var err error
	if h.js, err = jetstream.New(h.nc); err != nil {
		t.Fatal(err)
	}
	return h
}

// startWorker runs a worker with its own connection and its own workflow
// service, as a separate process would, until the test ends.
func (h *harness) startWorker() *workflowtask.Service {
	t := h.t
	t.Helper()
	nc := h.srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	log := workertest.Logger()
	svc := workflowtask.New(js, workflowtask.Config{Web: h.web.category(), Brain: h.brain.category(), Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: fmt.Sprintf("w%d", time.Now().UnixNano()), Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}, Approval: h.approval}
	assembler := turn.NewAssembler(svc.Category(), diagnostics.Category(diagnostics.Config{MarkDir: h.markDir}))
	w, err := engine.New(ctx, nc, cfg, assembler, svc, log)
	if err != nil {
		cancel()
		t.Fatalf("worker.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	workertest.WaitForService(h.t, h.nc)
	return svc
}

// item builders for a step's output.

func prose(text string) json.RawMessage {
	return mustJSON(map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": text}}})
}

func call(callID, name string, args any) json.RawMessage {
	s, ok := args.(string)
	if !ok {
		s = string(mustJSON(args))
	}
	return mustJSON(map[string]any{"type": "function_call", "call_id": callID, "name": name, "arguments": s})
}

func submit(callID string, result any) json.RawMessage {
	return call(callID, workflowtask.SubmitResultName, map[string]any{"result": result})
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// taskContext is the context a gateway sends with a task turn's steps.
func taskContext(wf, task string, bindings ...string) protocol.Context {
	c := protocol.Context{Kind: protocol.KindWorkflowTask, WorkflowID: wf, TaskID: task, Bindings: map[string]bool{}}
	for _, b := range bindings {
		c.Bindings[b] = true
	}
	return c
}

// publishStep publishes a step message as a gateway does. msgID is
// normally "" (the protocol's id); a test simulating a redelivery gives
// its own.
func (h *harness) publishStep(prefix, turnID string, step int64, ctx any, msgID string, output ...json.RawMessage) {
	h.t.Helper()
	if output == nil {
		output = []json.RawMessage{}
	}
	body := mustJSON(map[string]any{"agent_id": agent, "turn_id": turnID, "step": step, "context": ctx, "output": output})
	m := nats.NewMsg(protocol.Subject(prefix, agent, turnID))
	m.Data = body
	if msgID == "" {
		msgID = protocol.StepMsgID(agent, turnID, step)
	}
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	if _, err := h.js.PublishMsg(context.Background(), m); err != nil {
		h.t.Fatalf("publishing step: %v", err)
	}
}

// outEvent is a call.output or step.done as the gateway reads it.
type outEvent struct {
	Type    string            `json:"type"`
	Step    int64             `json:"step"`
	CallID  string            `json:"call_id"`
	Name    string            `json:"name"`
	Status  string            `json:"status"`
	Error   *tool.Error       `json:"error"`
	Item    json.RawMessage   `json:"item"`
	Details json.RawMessage   `json:"details"`
	Items   []json.RawMessage `json:"items"`
	EndTurn bool              `json:"end_turn"`
	Task    *protocol.Verdict
}

// output is the text of a function_call_output item.
func (e outEvent) output() string {
	var it protocol.FunctionCallOutput
	_ = json.Unmarshal(e.Item, &it)
	return it.Output
}

// stepEvents are a step's call.output events and its step.done.
type stepEvents struct {
	calls map[string]outEvent
	done  outEvent
}

// next reads the next message of an ordered consumer, failing the test
// when none arrives in time.
func next(t *testing.T, c jetstream.Consumer) jetstream.Msg {
	t.Helper()
	m, err := c.Next(jetstream.FetchMaxWait(wait))
	if err != nil {
		t.Fatalf("waiting for an event: %v", err)
	}
	return m
}

// turnOutputs follows one turn's output events; events of steps not
// asked for yet are kept until they are.
type turnOutputs struct {
	c       jetstream.Consumer
	pending map[int64]*stepEvents
}

// stepDone reads a turn's outputs up to the step.done of step, and
// returns that step's events.
func (h *harness) stepDone(turnID string, step int64) stepEvents {
	h.t.Helper()
	o, ok := h.outputs[turnID]
	if !ok {
		c, err := h.js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
			jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)}})
		if err != nil {
			h.t.Fatal(err)
		}
		o = &turnOutputs{c: c, pending: map[int64]*stepEvents{}}
		h.outputs[turnID] = o
	}
	for {
		if se := o.pending[step]; se != nil && se.done.Type != "" {
			delete(o.pending, step)
			return *se
		}
		var ev outEvent
		if err := json.Unmarshal(next(h.t, o.c).Data(), &ev); err != nil {
			h.t.Fatal(err)
		}
		se := o.pending[ev.Step]
		if se == nil {
			se = &stepEvents{calls: map[string]outEvent{}}
			o.pending[ev.Step] = se
		}
		if ev.Type == protocol.EventStepDone {
			se.done = ev
		} else {
			se.calls[ev.CallID] = ev
		}
	}
}

// runStep publishes one step and waits for its events.
func (h *harness) runStep(prefix, turnID string, step int64, ctx any, output ...json.RawMessage) stepEvents {
	h.t.Helper()
	h.publishStep(prefix, turnID, step, ctx, "", output...)
	return h.stepDone(turnID, step)
}

// events follows a workflow's events from the start.
func (h *harness) events(wf string) jetstream.Consumer {
	h.t.Helper()
	c, err := h.js.OrderedConsumer(context.Background(), protocol.StreamWorkflows,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{"workflow.event." + wf}})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// nextEvent reads the next workflow event.
func nextEvent(t *testing.T, c jetstream.Consumer) (protocol.WorkflowEvent, jetstream.Msg) {
	t.Helper()
	m := next(t, c)
	var ev protocol.WorkflowEvent
	if err := json.Unmarshal(m.Data(), &ev); err != nil {
		t.Fatal(err)
	}
	return ev, m
}

// noMoreEvents checks that a consumer has nothing more for a moment.
func noMoreEvents(t *testing.T, c jetstream.Consumer) {
	t.Helper()
	if m, err := c.Next(jetstream.FetchMaxWait(300 * time.Millisecond)); err == nil {
		t.Errorf("unexpected event %s", m.Data())
	}
}

// taskSpec is one task for start_workflow.
type taskSpec struct {
	ID           string          `json:"id"`
	Instructions string          `json:"instructions"`
	ResultSchema json.RawMessage `json:"result_schema"`
}

// answerSchema is a small strict result schema: an object with a string
// answer and a confidence between 0 and 1.
var answerSchema = json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string","minLength":1},"confidence":{"type":"number","minimum":0,"maximum":1}},"required":["answer","confidence"],"additionalProperties":false}`)

// mainStep runs one main-turn step with one workflow tool call and returns
// that call's event.
func (h *harness) mainStep(step int64, name string, args any) outEvent {
	h.t.Helper()
	callID := fmt.Sprintf("m%d", step)
	se := h.runStep(protocol.PrefixCall, mainTurn, step, protocol.Context{Kind: protocol.KindText}, call(callID, name, args))
	return se.calls[callID]
}

// startWorkflow starts a workflow from main-turn step step and returns its
// id and task turn ids by task id.
func (h *harness) startWorkflow(step int64, tasks ...taskSpec) (string, map[string]string) {
	h.t.Helper()
	ev := h.mainStep(step, workflowtask.StartWorkflowName, map[string]any{"title": "test", "tasks": tasks})
	if ev.Status != protocol.StatusOK {
		h.t.Fatalf("start_workflow: %s %s", ev.Status, ev.output())
	}
	var d struct {
		WorkflowID string `json:"workflow_id"`
		Tasks      []struct {
			TaskID string `json:"task_id"`
			TurnID string `json:"turn_id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(ev.Details, &d); err != nil {
		h.t.Fatal(err)
	}
	turns := map[string]string{}
	for _, t := range d.Tasks {
		turns[t.TaskID] = t.TurnID
	}
	return d.WorkflowID, turns
}

// task reads a task record straight from the WORKFLOWS bucket.
func (h *harness) task(wf, task string) (workflowtask.Task, uint64) {
	h.t.Helper()
	kv, err := h.js.KeyValue(context.Background(), protocol.BucketWorkflows)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := kv.Get(context.Background(), workflowtask.TaskKey(wf, task))
	if err != nil {
		h.t.Fatalf("reading task %s/%s: %v", wf, task, err)
	}
	var rec workflowtask.Task
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		h.t.Fatal(err)
	}
	return rec, e.Revision()
}

// catalog requests a catalog over NATS as a gateway does.
func (h *harness) catalog(turnID string, c protocol.Context) (*protocol.CatalogReply, *nats.Msg) {
	h.t.Helper()
	req := mustJSON(protocol.CatalogRequest{AgentID: agent, TurnID: turnID, Context: c})
	m, err := h.nc.Request(protocol.SubjectTools, req, wait)
	if err != nil {
		h.t.Fatalf("catalog request: %v", err)
	}
	if code := m.Header.Get("Nats-Service-Error-Code"); code != "" {
		return nil, m
	}
	var reply protocol.CatalogReply
	if err := json.Unmarshal(m.Data, &reply); err != nil {
		h.t.Fatal(err)
	}
	return &reply, m
}

// toolNames lists the names in a catalog, namespaces flattened.
func toolNames(t *testing.T, catalog json.RawMessage) []string {
	t.Helper()
	var entries []struct {
		Type  string            `json:"type"`
		Name  string            `json:"name"`
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(catalog, &entries); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Type == "namespace" {
			names = append(names, toolNames(t, mustJSON(e.Tools))...)
			continue
		}
		names = append(names, e.Name)
	}
	return names
}

// markFile is where diag's mark tool writes; it exists only if mark ran.
func (h *harness) markFile() string { return filepath.Join(h.markDir, "marks.log") }
