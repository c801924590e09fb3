package workflowtask_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// TestEndToEnd drives a whole workflow as a gateway would: start_workflow
// in a main turn, then for each task.ready event the task's catalog and
// its turn, step by step, following each verdict, until
// workflow.completed.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	h.startWorker()

	colour := json.RawMessage(`{"type":"object","properties":{"colour":{"type":"string","enum":["red","green","blue"]},"why":{"type":"string"}},"required":["colour"],"additionalProperties":false}`)
	list := json.RawMessage(`{"type":"array","items":{"type":"string"},"minItems":2}`)
	wf, _ := h.startWorkflow(0,
		taskSpec{ID: "answer", Instructions: "Answer.", ResultSchema: answerSchema},
		taskSpec{ID: "colour", Instructions: "Pick a colour.", ResultSchema: colour},
		taskSpec{ID: "names", Instructions: "List two names.", ResultSchema: list},
	)
	events := h.events(wf)

	// What the model answers in each task turn, step by step; the gateway
	// loop below knows nothing of it but the verdicts.
	script := map[string][][]json.RawMessage{
		"answer": {{submit("a1", map[string]any{"answer": "yes", "confidence": 0.8})}},
		"colour": {
			{submit("c1", map[string]any{"colour": "purple"})},
			{submit("c2", map[string]any{"colour": "blue", "why": nil})}, // strict's null for an absent field
		},
		"names": {
			{prose("Alice and Bob.")},
			{submit("n1", []string{"Alice", "Bob"})},
		},
	}
	wantVerdicts := map[string][]string{
		"answer": {protocol.VerdictAccepted},
		"colour": {protocol.VerdictRejected, protocol.VerdictAccepted},
		"names":  {protocol.VerdictRepair, protocol.VerdictAccepted},
	}
	wantResults := map[string]string{
		"answer": `{"answer":"yes","confidence":0.8}`,
		"colour": `{"colour":"blue"}`,
		"names":  `["Alice","Bob"]`,
	}

	accepted := map[string]string{}
	for {
		ev, _ := nextEvent(t, events)
		switch ev.Type {
		case protocol.EventWorkflowStarted:
			if len(ev.Tasks) != 3 || ev.Title != "test" {
				t.Errorf("workflow.started %+v", ev)
			}
		case protocol.EventTaskReady:
			c := taskContext(ev.WorkflowID, ev.TaskID, "web")
			reply, _ := h.catalog(ev.TurnID, c)
			if !strings.Contains(string(reply.Tools), `"name":"submit_result"`) {
				t.Fatalf("%s catalog %s", ev.TaskID, reply.Tools)
			}
			for step, output := range script[ev.TaskID] {
				se := h.runStep(protocol.PrefixTask, ev.TurnID, int64(step), c, output...)
				v := se.done.Task
				if v == nil || v.Status != wantVerdicts[ev.TaskID][step] {
					t.Fatalf("%s step %d: verdict %+v, want %s", ev.TaskID, step, v, wantVerdicts[ev.TaskID][step])
				}
				if se.done.EndTurn {
					break
				}
			}
		case protocol.EventTaskAccepted:
			accepted[ev.TaskID] = string(ev.Result)
		case protocol.EventTaskFailed:
			t.Fatalf("task %s failed: %s", ev.TaskID, ev.Reason)
		case protocol.EventWorkflowCompleted:
			for _, ref := range ev.Tasks {
				if ref.Status != workflowtask.TaskAccepted {
					t.Errorf("task %s ended %s", ref.TaskID, ref.Status)
				}
			}
			for id, want := range wantResults {
				if accepted[id] != want {
					t.Errorf("%s: task.accepted result %s, want %s", id, accepted[id], want)
				}
			}
			if len(accepted) != 3 {
				t.Errorf("workflow.completed before every task.accepted: %v", accepted)
			}
			noMoreEvents(t, events)

			// The main turn sees it too.
			shown := h.mainStep(1, workflowtask.ShowWorkflowName, map[string]any{"workflow_id": wf})
			var view struct {
				Status string `json:"status"`
				Tasks  []struct {
					TaskID string          `json:"task_id"`
					Result json.RawMessage `json:"result"`
				} `json:"tasks"`
			}
			if err := json.Unmarshal(shown.Details, &view); err != nil || view.Status != workflowtask.WorkflowCompleted || len(view.Tasks) != 3 {
				t.Fatalf("show_workflow %s (%v)", shown.Details, err)
			}
			for _, tv := range view.Tasks {
				if string(tv.Result) != wantResults[tv.TaskID] {
					t.Errorf("show_workflow %s: %s", tv.TaskID, tv.Result)
				}
			}
			listed := h.mainStep(2, workflowtask.ListWorkflowsName, map[string]any{"status": "completed"})
			if !strings.Contains(listed.output(), wf) {
				t.Errorf("list_workflows: %s", listed.output())
			}
			return
		}
	}
}
