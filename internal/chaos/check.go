package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
)

// outputEvent is an event read back from TURN_OUTPUTS.
type outputEvent struct {
	Type   string     `json:"type"`
	TurnID string     `json:"turn_id"`
	Step   int64      `json:"step"`
	CallID string     `json:"call_id"`
	Name   string     `json:"name"`
	Status string     `json:"status"`
	Error  *callError `json:"error"`
	Task   *struct {
		WorkflowID string          `json:"workflow_id"`
		TaskID     string          `json:"task_id"`
		Status     string          `json:"status"`
		Result     json.RawMessage `json:"result"`
	} `json:"task"`
}

// callError is the error of a call.output.
type callError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// taskRecord is what WORKFLOWS holds for a task (Found false: no record).
type taskRecord struct {
	Found  bool
	Status string
	Result json.RawMessage
}

// evidence is everything a run reads back at its end.
type evidence struct {
	published map[stepKey]*stepSpec
	outputs   []outputEvent
	events    []protocol.WorkflowEvent // for this run's agent
	marks     []string                 // every line of every marks.log
	// records are the task records of the tasks whose step.done said
	// accepted, by taskKey.
	records  map[string]taskRecord
	dead     []stepKey // steps in the dead-letter stream
	leftover int       // steps still in the work queues
}

func taskKey(workflow, task string) string { return workflow + "/" + task }

// acceptedTasks are the tasks a step.done reported accepted: the records
// to read back.
func acceptedTasks(outputs []outputEvent) map[string][2]string {
	out := map[string][2]string{}
	for _, e := range outputs {
		if e.Type == protocol.EventStepDone && e.Task != nil && e.Task.Status == protocol.VerdictAccepted {
			out[taskKey(e.Task.WorkflowID, e.Task.TaskID)] = [2]string{e.Task.WorkflowID, e.Task.TaskID}
		}
	}
	return out
}

// maxExamples bounds the examples kept of each kind of violation.
const maxExamples = 5

// check works out the figures and every violation from the evidence.
func check(ev *evidence, r *Report) {
	example := func(kind, format string, args ...any) {
		if r.Examples == nil {
			r.Examples = map[string][]string{}
		}
		if len(r.Examples[kind]) < maxExamples {
			r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
		}
	}

	// Steps: exactly one step.done each; calls: exactly one call.output.
	done := map[stepKey]int{}
	doneEv := map[stepKey]outputEvent{}
	outputs := map[string]int{}
	outputEv := map[string]outputEvent{}
	for _, e := range ev.outputs {
		key := stepKey{Turn: e.TurnID, Step: e.Step}
		switch e.Type {
		case protocol.EventStepDone:
			done[key]++
			if done[key] == 1 {
				doneEv[key] = e
			}
		case protocol.EventCallOutput:
			ck := key.String() + "/" + e.CallID
			outputs[ck]++
			if outputs[ck] == 1 {
				outputEv[ck] = e
			}
		}
	}
	for key, spec := range ev.published {
		if spec.Task != nil {
			r.TaskSteps++
		} else {
			r.MainSteps++
			if spec.Fair == FloodKey {
				r.FloodSteps++
			}
		}
		switch n := done[key]; {
		case n == 0:
			r.Lost++
			example("lost", "step %s has no step.done", key)
			continue
		case n > 1:
			r.Doubled++
			example("doubled", "step %s has %d step.done events", key, n)
		}
		r.Done++
		for _, c := range spec.Calls {
			if outputs[key.String()+"/"+c.ID] == 0 {
				r.OutputsMissing++
				example("outputs missing", "call %s/%s has no call.output although its step is done", key, c.ID)
			}
		}
	}
	r.Published = r.MainSteps + r.TaskSteps
	for key, n := range done {
		if ev.published[key] == nil {
			r.Unexpected += n
			example("unexpected", "step.done for %s, which was never published", key)
		}
	}
	for ck, n := range outputs {
		if n > 1 {
			r.OutputsDoubled += n - 1
			example("outputs doubled", "call %s has %d call.output events", ck, n)
		}
	}

	// Non-read-only bodies: each mark label at most once, exactly once
	// when its call reported ok; each workflow title started at most once.
	marks := map[string]int{}
	for _, m := range ev.marks {
		marks[m]++
	}
	r.Marks = len(ev.marks)
	for label, n := range marks {
		if n > 1 {
			r.MarksDoubled++
			example("marks doubled", "mark %s ran %d times", label, n)
		}
	}
	started := map[string]int{}
	workflowOf := map[string]string{} // title → workflow id
	readyOf := map[string]int{}       // workflow id → tasks announced
	for _, e := range ev.events {
		switch e.Type {
		case protocol.EventWorkflowStarted:
			started[e.Title]++
			workflowOf[e.Title] = e.WorkflowID
		case protocol.EventTaskReady:
			readyOf[e.WorkflowID]++
		}
	}
	for key, spec := range ev.published {
		for _, c := range spec.Calls {
			o, ok := outputEv[key.String()+"/"+c.ID]
			if !ok {
				continue
			}
			interrupted := o.Status == protocol.StatusError && o.Error != nil && o.Error.Kind == "interrupted"
			if o.Status == protocol.StatusError && o.Error != nil {
				if r.CallErrors == nil {
					r.CallErrors = map[string]int{}
				}
				r.CallErrors[c.Name+":"+o.Error.Kind]++
				what := fmt.Sprintf("%s %s/%s: %s: %s", c.Name, key, c.ID, o.Error.Kind, textclip.Ellipsis(o.Error.Message, 300))
				if failedWrite(c.Name, o.Error.Kind) {
					r.WorkflowWritesFailed++
					example("failed workflow writes", "%s", what)
				} else if len(r.CallErrorExamples) < maxExamples {
					r.CallErrorExamples = append(r.CallErrorExamples, what)
				}
			}
			switch c.Name {
			case "mark":
				if interrupted {
					r.MarksInterrupted++
				}
				if o.Status == protocol.StatusOK && marks[c.Label] == 0 {
					r.MarksMissing++
					example("marks missing", "mark %s reported ok but never ran", c.Label)
				}
			case workflowtask.StartWorkflowName:
				r.Workflows++
				if interrupted {
					r.WorkflowsInterrupted++
				}
				if o.Status == protocol.StatusOK && started[c.Label] == 0 {
					r.WorkflowsMissing++
					example("workflows missing", "start_workflow %s reported ok but started no workflow", c.Label)
				}
				if o.Status == protocol.StatusOK && readyOf[workflowOf[c.Label]] != c.Tasks {
					r.TasksMissing++
					example("tasks missing", "start_workflow %s reported ok but workflow %s has %d task.ready events, want %d", c.Label, workflowOf[c.Label], readyOf[workflowOf[c.Label]], c.Tasks)
				}
			}
		}
	}
	for title, n := range started {
		if n > 1 {
			r.WorkflowsDoubled++
			example("workflows doubled", "start_workflow %s started %d workflows", title, n)
		}
	}

	// Committed results: every task a step.done called accepted has its
	// result in WORKFLOWS and a task.accepted event with it.
	acceptedEv := map[string]json.RawMessage{}
	ready := map[string]bool{}
	for _, e := range ev.events {
		switch e.Type {
		case protocol.EventTaskAccepted:
			acceptedEv[taskKey(e.WorkflowID, e.TaskID)] = e.Result
		case protocol.EventTaskReady:
			ready[taskKey(e.WorkflowID, e.TaskID)] = true
		}
	}
	r.TasksReady = len(ready)
	ended := map[string]bool{}
	seen := map[string]bool{}
	keys := make([]stepKey, 0, len(doneEv))
	for k := range doneEv {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b stepKey) int { return strings.Compare(a.String(), b.String()) })
	for _, key := range keys {
		e := doneEv[key]
		spec := ev.published[key]
		if e.Task == nil || spec == nil || spec.Task == nil {
			continue
		}
		tk := taskKey(e.Task.WorkflowID, e.Task.TaskID)
		if e.Task.Status == protocol.VerdictAccepted || e.Task.Status == protocol.VerdictFailed {
			ended[tk] = true
		}
		if e.Task.Status != protocol.VerdictAccepted || seen[tk] {
			continue
		}
		seen[tk] = true
		want := spec.Task.Result
		rec := ev.records[tk]
		switch {
		case !sameJSON(e.Task.Result, want):
			r.ResultsLost++
			example("results lost", "task %s: step.done accepted %s, the task turn submitted %s", tk, e.Task.Result, want)
		case !rec.Found:
			r.ResultsLost++
			example("results lost", "task %s: accepted, but WORKFLOWS has no record of it", tk)
		case rec.Status != workflowtask.TaskAccepted || !sameJSON(rec.Result, want):
			r.ResultsLost++
			example("results lost", "task %s: accepted, but WORKFLOWS holds status %s result %s", tk, rec.Status, rec.Result)
		case acceptedEv[tk] == nil:
			r.ResultsLost++
			example("results lost", "task %s: accepted and committed, but no task.accepted event", tk)
		case !sameJSON(acceptedEv[tk], want):
			r.ResultsLost++
			example("results lost", "task %s: task.accepted carries %s, want %s", tk, acceptedEv[tk], want)
		default:
			r.ResultsCommitted++
		}
	}
	for tk := range ready {
		if !ended[tk] {
			r.TasksUnfinished++
			example("tasks unfinished", "task %s was announced but its turn never ended", tk)
		}
	}

	r.DeadLetters = len(ev.dead)
	for _, k := range ev.dead {
		example("dead letters", "step %s was dead-lettered", k)
	}
	r.Leftover = ev.leftover
	if r.Leftover > 0 {
		example("left in the work queues", "%d steps are still in TURN_CALLS or TURN_TASKS", r.Leftover)
	}
}

// failedWrite reports whether a call of the workflow tools that ended in
// an error of kind failed to write what it was for. An interrupted call
// is not one: its worker was killed while it ran, and the model is told
// it may have taken effect in part. A rejected submission is the
// gateway's doing; one that could not be recorded is a failed write.
func failedWrite(tool, kind string) bool {
	switch tool {
	case workflowtask.StartWorkflowName:
		return kind != "interrupted"
	case workflowtask.SubmitResultName:
		return kind == "internal"
	}
	return false
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, b) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}
