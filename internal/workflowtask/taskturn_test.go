package workflowtask_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

func oneTask(id string) taskSpec {
	return taskSpec{ID: id, Instructions: "Answer the question.", ResultSchema: answerSchema}
}

// wantVerdict checks a step.done's task verdict and end_turn.
func wantVerdict(t *testing.T, se stepEvents, status string, endTurn bool) *protocol.Verdict {
	t.Helper()
	v := se.done.Task
	if v == nil {
		t.Fatalf("step.done has no task verdict")
	}
	if v.Status != status || se.done.EndTurn != endTurn {
		t.Fatalf("verdict %s (reason %q), end_turn %v; want %s, end_turn %v", v.Status, v.Reason, se.done.EndTurn, status, endTurn)
	}
	return v
}

func TestAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	events := h.events(wf)
	if ev, _ := nextEvent(t, events); ev.Type != protocol.EventWorkflowStarted || ev.TurnID != mainTurn || len(ev.Tasks) != 1 {
		t.Fatalf("first event %+v, want workflow.started from %s", ev, mainTurn)
	}
	ready, m := nextEvent(t, events)
	if ready.Type != protocol.EventTaskReady || ready.TaskID != "q1" || ready.TurnID != turns["q1"] ||
		ready.AgentID != agent || ready.Instructions != "Answer the question." || ready.WorkflowID != wf {
		t.Fatalf("task.ready %+v", ready)
	}
	if id := m.Headers().Get(jetstream.MsgIDHeader); id != wf+".q1.ready" {
		t.Errorf("task.ready Nats-Msg-Id %q", id)
	}
	if rec, _ := h.task(wf, "q1"); rec.Status != workflowtask.TaskReady {
		t.Errorf("task status after task.ready is %s, want ready", rec.Status)
	}

	result := map[string]any{"answer": "42", "confidence": 0.9}
	se := h.runStep(protocol.PrefixTask, turns["q1"], 0, taskContext(wf, "q1"), submit("c1", result))
	v := wantVerdict(t, se, protocol.VerdictAccepted, true)
	if string(v.Result) != `{"answer":"42","confidence":0.9}` || v.WorkflowID != wf || v.TaskID != "q1" {
		t.Errorf("verdict %+v", v)
	}
	if out := se.calls["c1"]; out.Status != protocol.StatusOK || !strings.Contains(out.output(), "Accepted") {
		t.Errorf("submit_result output %s: %s", out.Status, out.output())
	}

	rec, _ := h.task(wf, "q1")
	if rec.Status != workflowtask.TaskAccepted || string(rec.Result) != `{"answer":"42","confidence":0.9}` ||
		rec.EndedBy == nil || rec.EndedBy.TurnID != turns["q1"] || rec.EndedBy.Step != 0 || rec.EndedBy.CallID != "c1" {
		t.Errorf("stored task %+v", rec)
	}
	accepted, _ := nextEvent(t, events)
	if accepted.Type != protocol.EventTaskAccepted || string(accepted.Result) != string(rec.Result) || accepted.TurnID != turns["q1"] {
		t.Errorf("event %+v, want task.accepted", accepted)
	}
	done, _ := nextEvent(t, events)
	if done.Type != protocol.EventWorkflowCompleted || len(done.Tasks) != 1 || done.Tasks[0].Status != workflowtask.TaskAccepted {
		t.Errorf("event %+v, want workflow.completed", done)
	}

	// A step after acceptance runs nothing and commits nothing.
	se = h.runStep(protocol.PrefixTask, turns["q1"], 1, taskContext(wf, "q1", "web"),
		submit("c2", map[string]any{"answer": "other", "confidence": 0.1}), call("c3", "web_search", map[string]any{"query": "x"}))
	v = wantVerdict(t, se, protocol.VerdictAccepted, true)
	if string(v.Result) != string(rec.Result) {
		t.Errorf("result after a second submission %s", v.Result)
	}
	if out := se.calls["c2"]; out.Error == nil || !strings.Contains(out.output(), "already been accepted") {
		t.Errorf("second submission answered %s", out.output())
	}
	if out := se.calls["c3"]; out.Error == nil || out.Error.Kind != tool.Aborted {
		t.Errorf("call after acceptance: %+v", out.Error)
	}
	if h.web.runs.Load() != 0 {
		t.Error("a web tool ran after the task ended")
	}
	if again, _ := h.task(wf, "q1"); string(again.Result) != string(rec.Result) || again.Revision != rec.Revision {
		t.Errorf("the task record changed: %+v", again)
	}
	noMoreEvents(t, events)
}

func TestRejectedThenAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]

	se := h.runStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"),
		submit("c1", map[string]any{"answer": "", "confidence": 7, "extra": true}))
	wantVerdict(t, se, protocol.VerdictRejected, false)
	out := se.calls["c1"]
	if out.Error == nil || out.Error.Kind != tool.InvalidArguments {
		t.Fatalf("rejected submission: %+v", out.Error)
	}
	for _, want := range []string{"/result/answer", "/result/confidence", "/result"} {
		if !strings.Contains(out.output(), want) {
			t.Errorf("output does not point at %s:\n%s", want, out.output())
		}
	}
	if rec, _ := h.task(wf, "q1"); rec.Status != workflowtask.TaskReady {
		t.Fatalf("task %s after a rejection", rec.Status)
	}

	se = h.runStep(protocol.PrefixTask, turnID, 1, taskContext(wf, "q1"),
		submit("c2", map[string]any{"answer": "fixed", "confidence": 0.5}))
	wantVerdict(t, se, protocol.VerdictAccepted, true)
	if rec, _ := h.task(wf, "q1"); rec.Status != workflowtask.TaskAccepted || string(rec.Result) != `{"answer":"fixed","confidence":0.5}` {
		t.Errorf("stored %+v", rec)
	}
}

func TestProseRepairThenAccepted(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]

	se := h.runStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"), prose("The answer is 42."))
	v := wantVerdict(t, se, protocol.VerdictRepair, false)
	if !strings.Contains(v.Instruction, "submit_result") || !strings.Contains(v.Instruction, string(answerSchema)) || len(v.Instruction) > 4096 {
		t.Errorf("instruction %q", v.Instruction)
	}
	if len(se.done.Items) != 0 {
		t.Errorf("items %s", se.done.Items)
	}

	// The same step delivered again is the same repair, not a second one.
	h.publishStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"), "redelivery-0", prose("The answer is 42."))
	h.waitTasksDrained()

	se = h.runStep(protocol.PrefixTask, turnID, 1, taskContext(wf, "q1"), submit("c1", map[string]any{"answer": "42", "confidence": 1}))
	wantVerdict(t, se, protocol.VerdictAccepted, true)
}

func TestProseTwiceFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]
	events := h.events(wf)

	wantVerdict(t, h.runStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"), prose("Thinking.")), protocol.VerdictRepair, false)
	h.publishStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"), "redelivery-0", prose("Thinking."))
	h.waitTasksDrained()
	// An empty output counts as a step without a call too.
	v := wantVerdict(t, h.runStep(protocol.PrefixTask, turnID, 1, taskContext(wf, "q1")), protocol.VerdictFailed, true)
	if v.Reason != workflowtask.ReasonNoSubmission {
		t.Errorf("reason %q", v.Reason)
	}
	rec, _ := h.task(wf, "q1")
	if rec.Status != workflowtask.TaskFailed || rec.Reason != workflowtask.ReasonNoSubmission || rec.EndedBy == nil || rec.EndedBy.Step != 1 {
		t.Errorf("stored %+v (the redelivered step 0 must not have counted as a second repair)", rec)
	}
	for _, want := range []string{protocol.EventWorkflowStarted, protocol.EventTaskReady, protocol.EventTaskFailed, protocol.EventWorkflowCompleted} {
		ev, _ := nextEvent(t, events)
		if ev.Type != want {
			t.Fatalf("event %s, want %s", ev.Type, want)
		}
		if ev.Type == protocol.EventTaskFailed && ev.Reason != workflowtask.ReasonNoSubmission {
			t.Errorf("task.failed reason %q", ev.Reason)
		}
	}
}

// waitTasksDrained waits until every task step published so far has been
// handled and acknowledged (the work queue removes it).
func (h *harness) waitTasksDrained() {
	h.t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		s, err := h.js.Stream(context.Background(), protocol.StreamTasks)
		if err != nil {
			h.t.Fatal(err)
		}
		if s.CachedInfo().State.Msgs == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatal("task steps were not handled in time")
}

func TestForbiddenToolsInTaskTurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	// The context claims every category; only the task catalog counts.
	c := taskContext(wf, "q1", "diagnostics", "computer", "background_jobs", "schedules")
	c.Skills, c.MCPServers = []string{"release-notes"}, []string{"github"}
	se := h.runStep(protocol.PrefixTask, turns["q1"], 0, c,
		call("c1", "mark", map[string]any{"label": "task-ran"}),
		call("c2", "ping", map[string]any{}),
		call("c3", workflowtask.StartWorkflowName, map[string]any{"tasks": []taskSpec{oneTask("x")}}),
		call("c4", "remember", map[string]any{"query": "x"}),
		call("c5", "web_search", map[string]any{"query": "x"}),
	)
	for _, id := range []string{"c1", "c2", "c3", "c4", "c5"} {
		if out := se.calls[id]; out.Error == nil || out.Error.Kind != tool.UnknownTool {
			t.Errorf("%s (%s): %+v, want unknown_tool", id, out.Name, out.Error)
		}
	}
	wantVerdict(t, se, protocol.VerdictActive, false)
	if _, err := os.Stat(h.markFile()); !os.IsNotExist(err) {
		t.Errorf("mark ran in a task turn: %v", err)
	}
	if h.web.runs.Load()+h.brain.runs.Load() != 0 {
		t.Error("a tool ran")
	}
	// Nothing was started by the task turn: the agent has one workflow.
	ev := h.mainStep(1, workflowtask.ListWorkflowsName, map[string]any{})
	var list []struct {
		WorkflowID string `json:"workflow_id"`
	}
	if err := json.Unmarshal(ev.Details, &list); err != nil || len(list) != 1 || list[0].WorkflowID != wf {
		t.Errorf("workflows %s (%v)", ev.Details, err)
	}
}

func TestTaskCatalog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]

	claims := taskContext(wf, "q1", "computer", "diagnostics", "background_jobs", "schedules")
	claims.Skills, claims.MCPServers = []string{"release-notes"}, []string{"github"}
	reply, _ := h.catalog(turnID, claims)
	if got := toolNames(t, reply.Tools); !slices.Equal(got, []string{workflowtask.SubmitResultName}) {
		t.Errorf("catalog with only foreign claims: %v", got)
	}
	all := taskContext(wf, "q1", "web", "brain", "computer", "diagnostics")
	reply, _ = h.catalog(turnID, all)
	want := []string{"web_search", "web_fetch", "recall", "get_page", workflowtask.SubmitResultName}
	if got := toolNames(t, reply.Tools); !slices.Equal(got, want) {
		t.Errorf("catalog %v, want %v", got, want)
	}
	again, _ := h.catalog(turnID, all)
	if again.Digest != reply.Digest || string(again.Tools) != string(reply.Tools) {
		t.Error("the same context gave a different catalog")
	}

	// The main turn has the workflow tools; the task turn never does.
	mainReply, _ := h.catalog(mainTurn, protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"diagnostics": true}})
	names := toolNames(t, mainReply.Tools)
	for _, n := range []string{workflowtask.StartWorkflowName, workflowtask.ShowWorkflowName, workflowtask.ListWorkflowsName, workflowtask.CancelWorkflowName, "ping"} {
		if !slices.Contains(names, n) {
			t.Errorf("main catalog %v lacks %s", names, n)
		}
	}

	for name, c := range map[string]protocol.Context{
		"unknown task":     taskContext(wf, "nope"),
		"unknown workflow": taskContext("wf_nope", "q1"),
		"no ids":           taskContext("", ""),
	} {
		if _, m := h.catalog(turnID, c); m.Header.Get("Nats-Service-Error-Code") != "400" {
			t.Errorf("%s: reply %q %s, want a 400", name, m.Header.Get("Nats-Service-Error-Code"), m.Data)
		}
	}
	if _, m := h.catalog("someone_else", taskContext(wf, "q1")); m.Header.Get("Nats-Service-Error-Code") != "400" {
		t.Errorf("another turn's catalog request was answered: %s", m.Data)
	}
}

func TestStoredSchemaWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))

	// The message carries a permissive schema in every place a confused
	// gateway might put one; the value matches it, not the stored schema.
	permissive := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"additionalProperties":true}`)
	c := mustJSON(map[string]any{
		"kind": protocol.KindWorkflowTask, "workflow_id": wf, "task_id": "q1",
		"result_schema": permissive,
		"tools":         []any{map[string]any{"type": "function", "name": "submit_result", "parameters": map[string]any{"type": "object", "properties": map[string]any{"result": permissive}}}},
	})
	se := h.runStep(protocol.PrefixTask, turns["q1"], 0, c, submit("c1", map[string]any{"answer": 42}))
	wantVerdict(t, se, protocol.VerdictRejected, false)
	if out := se.calls["c1"]; out.Error == nil || out.Error.Kind != tool.InvalidArguments || !strings.Contains(out.output(), "/result/answer") {
		t.Errorf("output %s", out.output())
	}
	if rec, _ := h.task(wf, "q1"); rec.Status != workflowtask.TaskReady {
		t.Errorf("stored %+v", rec)
	}
}

func TestRacingCommitsCommitOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	h.startWorker()
	const n = 6
	var specs []taskSpec
	for i := range n {
		specs = append(specs, oneTask("t"+string(rune('a'+i))))
	}
	wf, turns := h.startWorkflow(0, specs...)

	kv, err := h.js.KeyValue(context.Background(), protocol.BucketWorkflows)
	if err != nil {
		t.Fatal(err)
	}
	watch, err := kv.Watch(context.Background(), "task."+wf+".*", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watch.Stop() }()

	// Two steps of each task's turn, each submitting its own valid value,
	// are published at once; the two workers take them as they come.
	var wg sync.WaitGroup
	for _, s := range specs {
		for step := range int64(2) {
			wg.Go(func() {
				h.publishStep(protocol.PrefixTask, turns[s.ID], step, taskContext(wf, s.ID), "",
					submit("c", map[string]any{"answer": "from step " + string(rune('0'+step)), "confidence": 0.5}))
			})
		}
	}
	wg.Wait()

	for _, s := range specs {
		var committed int
		var results []string
		for step := range int64(2) {
			se := h.stepDone(turns[s.ID], step)
			v := wantVerdict(t, se, protocol.VerdictAccepted, true)
			results = append(results, string(v.Result))
			var d struct {
				Committed bool `json:"committed"`
			}
			_ = json.Unmarshal(se.calls["c"].Details, &d)
			if d.Committed {
				committed++
			} else if !strings.Contains(se.calls["c"].output(), "already been accepted") {
				t.Errorf("%s step %d: the losing submission was answered %q", s.ID, step, se.calls["c"].output())
			}
		}
		if committed != 1 || results[0] != results[1] {
			t.Errorf("%s: %d calls committed, results %v", s.ID, committed, results)
		}
	}

	// Every write to a task record after the start: exactly one commit per
	// task, and nothing else that changes a result.
	commits := map[string]int{}
	deadline := time.After(wait)
	for len(commits) < n {
		select {
		case e := <-watch.Updates():
			var rec workflowtask.Task
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Status == workflowtask.TaskAccepted {
				commits[rec.TaskID]++
			}
		case <-deadline:
			t.Fatalf("saw commits %v", commits)
		}
	}
	select {
	case e := <-watch.Updates():
		var rec workflowtask.Task
		_ = json.Unmarshal(e.Value(), &rec)
		if rec.Status == workflowtask.TaskAccepted {
			t.Errorf("a second write of an accepted task: %s", e.Value())
		}
	case <-time.After(300 * time.Millisecond):
	}
	for id, c := range commits {
		if c != 1 {
			t.Errorf("task %s committed %d times", id, c)
		}
	}

	events := h.events(wf)
	accepted := map[string]int{}
	completed := 0
	for range 2 + n + n { // started, ready×n, accepted×n, completed
		ev, _ := nextEvent(t, events)
		switch ev.Type {
		case protocol.EventTaskAccepted:
			accepted[ev.TaskID]++
		case protocol.EventWorkflowCompleted:
			completed++
		}
	}
	noMoreEvents(t, events)
	if len(accepted) != n || completed != 1 {
		t.Errorf("task.accepted %v, workflow.completed %d", accepted, completed)
	}
}

func TestCancelledWorkflow(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("done"), oneTask("open"))
	events := h.events(wf)
	wantVerdict(t, h.runStep(protocol.PrefixTask, turns["done"], 0, taskContext(wf, "done"),
		submit("c1", map[string]any{"answer": "a", "confidence": 1})), protocol.VerdictAccepted, true)

	ev := h.mainStep(1, workflowtask.CancelWorkflowName, map[string]any{"workflow_id": wf, "reason": "no longer needed"})
	if ev.Status != protocol.StatusOK {
		t.Fatalf("cancel_workflow: %s", ev.output())
	}
	var types []string
	for range 4 { // started, ready, ready, accepted; then the cancel's events
		e, _ := nextEvent(t, events)
		types = append(types, e.Type)
	}
	failed, _ := nextEvent(t, events)
	cancelled, _ := nextEvent(t, events)
	if failed.Type != protocol.EventTaskFailed || failed.TaskID != "open" || failed.Reason != workflowtask.ReasonWorkflowCancelled {
		t.Errorf("after %v: %+v, want task.failed of open", types, failed)
	}
	if cancelled.Type != protocol.EventWorkflowCancelled || cancelled.Reason != "no longer needed" ||
		!slices.Equal(cancelled.Tasks, []protocol.WorkflowTask{
			{TaskID: "done", TurnID: turns["done"], Status: workflowtask.TaskAccepted},
			{TaskID: "open", TurnID: turns["open"], Status: workflowtask.TaskFailed},
		}) {
		t.Errorf("workflow.cancelled %+v", cancelled)
	}

	// The open task's turn is answered as failed, and its value is never
	// committed.
	se := h.runStep(protocol.PrefixTask, turns["open"], 0, taskContext(wf, "open", "web"),
		submit("c1", map[string]any{"answer": "late", "confidence": 1}), call("c2", "web_fetch", map[string]any{"query": "x"}))
	v := wantVerdict(t, se, protocol.VerdictFailed, true)
	if v.Reason != workflowtask.ReasonWorkflowCancelled {
		t.Errorf("reason %q", v.Reason)
	}
	for _, id := range []string{"c1", "c2"} {
		if out := se.calls[id]; out.Error == nil || out.Error.Kind != tool.Aborted {
			t.Errorf("%s: %+v", id, out.Error)
		}
	}
	if rec, _ := h.task(wf, "open"); rec.Status != workflowtask.TaskFailed || rec.Result != nil {
		t.Errorf("stored %+v", rec)
	}
	if h.web.runs.Load() != 0 {
		t.Error("a tool ran in a cancelled workflow")
	}
	noMoreEvents(t, events) // no workflow.completed, no second task.failed

	// Cancelling again reports it again; a second cancel changes nothing.
	if ev := h.mainStep(2, workflowtask.CancelWorkflowName, map[string]any{"workflow_id": wf}); ev.Status != protocol.StatusOK {
		t.Errorf("second cancel: %s", ev.output())
	}
	if rec, _ := h.task(wf, "done"); rec.Status != workflowtask.TaskAccepted {
		t.Errorf("the accepted task became %s", rec.Status)
	}
}

func TestCancelledTurnFailsTask(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	wf, turns := h.startWorkflow(0, oneTask("q1"))
	turnID := turns["q1"]
	kv, err := h.js.KeyValue(context.Background(), protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	marks, err := kv.Watch(context.Background(), protocol.TurnKey(agent, turnID, "cancel"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = marks.Stop() }()
	// The gateway cancels the task turn; the worker records the mark.
	if err := h.nc.Publish(protocol.Subject(protocol.PrefixCancel, agent, turnID), []byte(`{"reason":"user stopped it"}`)); err != nil {
		t.Fatal(err)
	}
	for marked := false; !marked; {
		select {
		case e := <-marks.Updates():
			marked = e != nil
		case <-time.After(wait):
			t.Fatal("the cancel mark was never written")
		}
	}
	se := h.runStep(protocol.PrefixTask, turnID, 0, taskContext(wf, "q1"), submit("c1", map[string]any{"answer": "a", "confidence": 1}))
	v := wantVerdict(t, se, protocol.VerdictFailed, true)
	if v.Reason != workflowtask.ReasonTurnCancelled {
		t.Errorf("reason %q", v.Reason)
	}
	if out := se.calls["c1"]; out.Error == nil || out.Error.Kind != tool.Aborted {
		t.Errorf("submission in a cancelled turn: %+v", out.Error)
	}
	if rec, _ := h.task(wf, "q1"); rec.Status != workflowtask.TaskFailed || rec.Reason != workflowtask.ReasonTurnCancelled {
		t.Errorf("stored %+v", rec)
	}
}

func TestStartWorkflowChecksBeforeStoring(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	cases := map[string]struct {
		tasks []taskSpec
		want  []string
	}{
		"duplicate ids": {
			tasks: []taskSpec{oneTask("a"), oneTask("a")},
			want:  []string{"/tasks/1/id", "unique"},
		},
		"open object": {
			tasks: []taskSpec{oneTask("a"), {ID: "b", Instructions: "x", ResultSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":true}`)}},
			want:  []string{"/tasks/1/result_schema", "additional properties"},
		},
		"oneOf": {
			tasks: []taskSpec{{ID: "a", Instructions: "x", ResultSchema: json.RawMessage(`{"oneOf":[{"type":"string"},{"type":"integer"}]}`)}},
			want:  []string{"/tasks/0/result_schema", "oneOf"},
		},
		"not a schema": {
			tasks: []taskSpec{{ID: "a", Instructions: "x", ResultSchema: json.RawMessage(`{"type":"strng"}`)}},
			want:  []string{"/tasks/0/result_schema"},
		},
	}
	step := int64(0)
	for name, c := range cases {
		ev := h.mainStep(step, workflowtask.StartWorkflowName, map[string]any{"tasks": c.tasks})
		step++
		if ev.Error == nil || ev.Error.Kind != tool.InvalidArguments {
			t.Errorf("%s: %+v", name, ev.Error)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(ev.output(), w) {
				t.Errorf("%s: output lacks %q:\n%s", name, w, ev.output())
			}
		}
	}
	kv, err := h.js.KeyValue(context.Background(), protocol.BucketWorkflows)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := kv.ListKeys(context.Background()); err == nil {
		for k := range keys.Keys() {
			t.Errorf("stored %s", k)
		}
	}

	// A schema for a non-object result is fine: the wrapper is the object.
	wf, _ := h.startWorkflow(step, taskSpec{ID: "s", Instructions: "Name a colour.", ResultSchema: json.RawMessage(`{"type":"string","enum":["red","green"]}`)})
	if rec, _ := h.task(wf, "s"); string(rec.ResultSchema) != `{"type":"string","enum":["red","green"]}` {
		t.Errorf("stored schema %s", rec.ResultSchema)
	}
}

func TestTaskTurnID(t *testing.T) {
	t.Parallel()
	wf := "wf_0123456789abcdef012345"
	if got := workflowtask.TaskTurnID(wf, "short"); got != "task_"+wf+"_short" {
		t.Errorf("short: %s", got)
	}
	long := strings.Repeat("x", 64)
	got := workflowtask.TaskTurnID(wf, long)
	if !protocol.ValidID(got) || got == workflowtask.TaskTurnID(wf, long[:63]) {
		t.Errorf("long: %s", got)
	}
	for _, id := range []string{"a", strings.Repeat("b", 33), strings.Repeat("c", 34), long} {
		if !protocol.ValidID(workflowtask.TaskTurnID(wf, id)) {
			t.Errorf("%s gives an invalid turn id", id)
		}
	}
}
