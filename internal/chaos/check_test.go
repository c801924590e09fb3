package chaos

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// world builds evidence for a clean run of two main steps (ping and mark)
// and one start_workflow step whose single task was accepted; each test
// then breaks one thing and checks the checker sees exactly that.
type world struct {
	ev *evidence
}

func newWorld() *world {
	w := &world{ev: &evidence{published: map[stepKey]*stepSpec{}, records: map[string]taskRecord{}}}
	for _, turn := range []string{"t1", "t2"} {
		key := stepKey{Turn: turn}
		label := "chaos." + turn + ".0"
		w.ev.published[key] = &stepSpec{Key: key, Calls: []callSpec{{ID: "p", Name: "ping"}, {ID: "m", Name: "mark", Label: label}}}
		w.ev.outputs = append(w.ev.outputs,
			outputEvent{Type: protocol.EventCallOutput, TurnID: turn, CallID: "p", Name: "ping", Status: protocol.StatusOK},
			outputEvent{Type: protocol.EventCallOutput, TurnID: turn, CallID: "m", Name: "mark", Status: protocol.StatusOK},
			outputEvent{Type: protocol.EventStepDone, TurnID: turn})
		w.ev.marks = append(w.ev.marks, label)
	}
	// A workflow with one task, accepted.
	wkey := stepKey{Turn: "t3"}
	w.ev.published[wkey] = &stepSpec{Key: wkey, Calls: []callSpec{{ID: "w", Name: workflowtask.StartWorkflowName, Label: "chaos.t3.0", Tasks: 1}}}
	w.ev.outputs = append(w.ev.outputs,
		outputEvent{Type: protocol.EventCallOutput, TurnID: "t3", CallID: "w", Name: workflowtask.StartWorkflowName, Status: protocol.StatusOK},
		outputEvent{Type: protocol.EventStepDone, TurnID: "t3"})
	result := json.RawMessage(`{"answer":"task_wf1_k0"}`)
	tkey := stepKey{Turn: "task_wf1_k0"}
	w.ev.published[tkey] = &stepSpec{Key: tkey, Task: &taskRef{Workflow: "wf1", Task: "k0", Turn: "task_wf1_k0", Result: result},
		Calls: []callSpec{{ID: "s0", Name: workflowtask.SubmitResultName}}}
	done := outputEvent{Type: protocol.EventStepDone, TurnID: "task_wf1_k0"}
	done.Task = &struct {
		WorkflowID string          `json:"workflow_id"`
		TaskID     string          `json:"task_id"`
		Status     string          `json:"status"`
		Result     json.RawMessage `json:"result"`
	}{WorkflowID: "wf1", TaskID: "k0", Status: protocol.VerdictAccepted, Result: json.RawMessage(`{"answer": "task_wf1_k0"}`)}
	w.ev.outputs = append(w.ev.outputs,
		outputEvent{Type: protocol.EventCallOutput, TurnID: "task_wf1_k0", CallID: "s0", Name: workflowtask.SubmitResultName, Status: protocol.StatusOK},
		done)
	w.ev.events = []protocol.WorkflowEvent{
		{Type: protocol.EventWorkflowStarted, WorkflowID: "wf1", Title: "chaos.t3.0"},
		{Type: protocol.EventTaskReady, WorkflowID: "wf1", TaskID: "k0", TurnID: "task_wf1_k0"},
		{Type: protocol.EventTaskAccepted, WorkflowID: "wf1", TaskID: "k0", Result: result},
	}
	w.ev.records[taskKey("wf1", "k0")] = taskRecord{Found: true, Status: workflowtask.TaskAccepted, Result: result}
	return w
}

func (w *world) check(t *testing.T) *Report {
	t.Helper()
	r := &Report{}
	check(w.ev, r)
	return r
}

// drop removes the output events matching f.
func (w *world) drop(f func(outputEvent) bool) {
	var keep []outputEvent
	for _, e := range w.ev.outputs {
		if !f(e) {
			keep = append(keep, e)
		}
	}
	w.ev.outputs = keep
}

func TestCheckClean(t *testing.T) {
	r := newWorld().check(t)
	if !r.OK() {
		t.Fatalf("a clean run has problems: %v\n%s", r.Problems(), r)
	}
	if r.Published != 4 || r.Done != 4 || r.MainSteps != 3 || r.TaskSteps != 1 || r.Marks != 2 ||
		r.Workflows != 1 || r.TasksReady != 1 || r.ResultsCommitted != 1 {
		t.Errorf("figures: %+v", r)
	}
}

func TestCheckFindsViolations(t *testing.T) {
	cases := []struct {
		name    string
		break_  func(w *world)
		problem string
		count   func(r *Report) int
	}{
		{"lost step", func(w *world) {
			w.drop(func(e outputEvent) bool { return e.TurnID == "t1" && e.Type == protocol.EventStepDone })
		}, "steps lost", func(r *Report) int { return r.Lost }},
		{"doubled step", func(w *world) {
			w.ev.outputs = append(w.ev.outputs, outputEvent{Type: protocol.EventStepDone, TurnID: "t2"})
		}, "steps doubled", func(r *Report) int { return r.Doubled }},
		{"doubled output", func(w *world) {
			w.ev.outputs = append(w.ev.outputs, outputEvent{Type: protocol.EventCallOutput, TurnID: "t2", CallID: "p", Status: protocol.StatusOK})
		}, "call.output events doubled", func(r *Report) int { return r.OutputsDoubled }},
		{"missing output", func(w *world) {
			w.drop(func(e outputEvent) bool { return e.TurnID == "t1" && e.CallID == "p" })
		}, "call.output events missing", func(r *Report) int { return r.OutputsMissing }},
		{"unexpected step", func(w *world) {
			w.ev.outputs = append(w.ev.outputs, outputEvent{Type: protocol.EventStepDone, TurnID: "t9", Step: 3})
		}, "never published", func(r *Report) int { return r.Unexpected }},
		{"mark ran twice", func(w *world) {
			w.ev.marks = append(w.ev.marks, "chaos.t1.0")
		}, "mark bodies run more than once", func(r *Report) int { return r.MarksDoubled }},
		{"ok mark never ran", func(w *world) {
			w.ev.marks = w.ev.marks[1:]
		}, "marks reported ok that never ran", func(r *Report) int { return r.MarksMissing }},
		{"workflow started twice", func(w *world) {
			w.ev.events = append(w.ev.events, protocol.WorkflowEvent{Type: protocol.EventWorkflowStarted, WorkflowID: "wf2", Title: "chaos.t3.0"})
		}, "started more than one workflow", func(r *Report) int { return r.WorkflowsDoubled }},
		{"task not announced", func(w *world) {
			w.ev.events = append(w.ev.events[:1], w.ev.events[2:]...)
		}, "without a task.ready", func(r *Report) int { return r.TasksMissing }},
		{"result not in WORKFLOWS", func(w *world) {
			w.ev.records[taskKey("wf1", "k0")] = taskRecord{}
		}, "accepted task results lost", func(r *Report) int { return r.ResultsLost }},
		{"result not committed", func(w *world) {
			w.ev.records[taskKey("wf1", "k0")] = taskRecord{Found: true, Status: workflowtask.TaskReady}
		}, "accepted task results lost", func(r *Report) int { return r.ResultsLost }},
		{"other result committed", func(w *world) {
			w.ev.records[taskKey("wf1", "k0")] = taskRecord{Found: true, Status: workflowtask.TaskAccepted, Result: json.RawMessage(`{"answer":"x"}`)}
		}, "accepted task results lost", func(r *Report) int { return r.ResultsLost }},
		{"no task.accepted", func(w *world) {
			w.ev.events = w.ev.events[:2]
		}, "accepted task results lost", func(r *Report) int { return r.ResultsLost }},
		{"task turn never ended", func(w *world) {
			w.drop(func(e outputEvent) bool { return e.TurnID == "task_wf1_k0" && e.Type == protocol.EventStepDone })
		}, "never ended", func(r *Report) int { return r.TasksUnfinished }},
		{"start_workflow failed", func(w *world) {
			w.fail("t3", "w", "tool_error")
		}, "failed to write", func(r *Report) int { return r.WorkflowWritesFailed }},
		{"submission not recorded", func(w *world) {
			w.fail("task_wf1_k0", "s0", "internal")
		}, "failed to write", func(r *Report) int { return r.WorkflowWritesFailed }},
		{"dead letter", func(w *world) {
			w.ev.dead = []stepKey{{Turn: "t1"}}
		}, "dead-lettered", func(r *Report) int { return r.DeadLetters }},
		{"left in the work queue", func(w *world) {
			w.ev.leftover = 1
		}, "left in the work queues", func(r *Report) int { return r.Leftover }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld()
			c.break_(w)
			r := w.check(t)
			if c.count(r) != 1 {
				t.Errorf("count %d, want 1\n%s", c.count(r), r)
			}
			if r.OK() || !strings.Contains(strings.Join(r.Problems(), "; "), c.problem) {
				t.Errorf("problems %q, want one about %q", r.Problems(), c.problem)
			}
			if len(r.Examples) == 0 {
				t.Error("no example of the violation")
			}
		})
	}
}

// TestCheckInterruptedIsNotAViolation: a mark cut short by a kill is
// reported interrupted and may or may not have left its trace; neither is
// a violation.
func TestCheckInterruptedIsNotAViolation(t *testing.T) {
	for _, ran := range []bool{false, true} {
		w := newWorld()
		for i, e := range w.ev.outputs {
			if e.TurnID == "t1" && e.CallID == "m" {
				w.ev.outputs[i].Status = protocol.StatusError
				w.ev.outputs[i].Error = &callError{Kind: "interrupted"}
			}
		}
		if !ran {
			w.ev.marks = w.ev.marks[1:]
		}
		r := w.check(t)
		if !r.OK() || r.MarksInterrupted != 1 || r.CallErrors["mark:interrupted"] != 1 {
			t.Errorf("ran=%v: %v, interrupted %d, errors %v", ran, r.Problems(), r.MarksInterrupted, r.CallErrors)
		}
	}
}

// fail makes a call's output an error of kind.
func (w *world) fail(turn, callID, kind string) {
	for i, e := range w.ev.outputs {
		if e.TurnID == turn && e.CallID == callID {
			w.ev.outputs[i].Status = protocol.StatusError
			w.ev.outputs[i].Error = &callError{Kind: kind, Message: "it went wrong"}
		}
	}
}

// TestCheckWorkflowCallErrors: a start_workflow cut short by a kill, or a
// submission the checks rejected, is counted and is not a failed write.
func TestCheckWorkflowCallErrors(t *testing.T) {
	w := newWorld()
	w.fail("t3", "w", "interrupted")
	w.fail("task_wf1_k0", "s0", "invalid_arguments")
	r := w.check(t)
	if !r.OK() || r.WorkflowWritesFailed != 0 || r.CallErrors["start_workflow:interrupted"] != 1 || r.CallErrors["submit_result:invalid_arguments"] != 1 {
		t.Fatalf("%v, %d failed writes, errors %v", r.Problems(), r.WorkflowWritesFailed, r.CallErrors)
	}
	if len(r.CallErrorExamples) != 2 || !strings.Contains(r.String(), "it went wrong") {
		t.Fatalf("examples %q, report:\n%s", r.CallErrorExamples, r)
	}
}

func TestParseFaults(t *testing.T) {
	all, err := ParseFaults("all")
	if err != nil || len(all) != len(AllFaults) {
		t.Fatalf("all: %v %v", all, err)
	}
	fs, err := ParseFaults("worker-kill, rolling-restart")
	if err != nil || len(fs) != 2 || fs[0] != FaultWorkerKill || fs[1] != FaultRollingRestart {
		t.Fatalf("list: %v %v", fs, err)
	}
	if _, err := ParseFaults("calls-leader,meteor"); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}
