package workflowtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/pause"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Context bindings a task turn reads; every other binding is ignored.
const (
	BindingWeb   = "web"
	BindingBrain = "brain"
)

// brainTools are the only brain tools a task turn may have, in catalog
// order, and only when they are read-only.
var brainTools = [...]string{"recall", "get_page"}

// verdictOf is the verdict for a task that has ended.
func verdictOf(t *Task) *protocol.Verdict {
	v := &protocol.Verdict{WorkflowID: t.WorkflowID, TaskID: t.TaskID}
	switch t.Status {
	case TaskAccepted:
		v.Status, v.Result = protocol.VerdictAccepted, t.Result
	case TaskFailed:
		v.Status, v.Reason = protocol.VerdictFailed, t.Reason
	default:
		v.Status = protocol.VerdictActive
	}
	return v
}

// Catalog answers turn.tools for a task turn: the fixed task catalog of
// the task the context names. Requests the gateway must fix wrap
// catalog.ErrBadRequest.
func (s *Service) Catalog(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error) {
	c := req.Context
	if c.Kind != protocol.KindWorkflowTask || !protocol.ValidID(c.WorkflowID) || !protocol.ValidID(c.TaskID) {
		return nil, fmt.Errorf("%w: a task turn's catalog needs context.kind %q with a workflow_id and a task_id", catalog.ErrBadRequest, protocol.KindWorkflowTask)
	}
	t, err := s.store.task(ctx, c.WorkflowID, c.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: workflow %s has no task %s", catalog.ErrBadRequest, c.WorkflowID, c.TaskID)
	}
	if err != nil {
		return nil, err
	}
	if err := belongs(t, req.AgentID, req.TurnID); err != nil {
		return nil, fmt.Errorf("%w: %v", catalog.ErrBadRequest, err)
	}
	set, err := s.taskSet(ctx, req.AgentID, req.TurnID, c, t)
	if err != nil {
		return nil, err
	}
	ts, digest := set.Catalog()
	return &protocol.CatalogReply{Tools: ts, Digest: digest, Notes: set.Notes}, nil
}

// belongs checks that a turn is the task's own.
func belongs(t *Task, agentID, turnID string) error {
	if t.AgentID != agentID || t.TurnID != turnID {
		return fmt.Errorf("task %s of workflow %s runs in turn %s.%s, not %s.%s", t.TaskID, t.WorkflowID, t.AgentID, t.TurnID, agentID, turnID)
	}
	return nil
}

// taskSet builds a task turn's set: the web tools, recall and get_page,
// submit_result, in that order, and nothing else. Each category sees a
// context that binds only its own category, so no claim in the step's
// context can make it contribute more.
func (s *Service) taskSet(ctx context.Context, agentID, turnID string, c protocol.Context, t *Task) (*turn.Set, error) {
	only := func(binding string) tool.Turn {
		return tool.Turn{AgentID: agentID, TurnID: turnID, Kind: protocol.KindWorkflowTask, Bindings: map[string]bool{binding: true}}
	}
	var all []*tool.Tool
	if s.cfg.Web.Tools != nil && c.Bound(BindingWeb) {
		ts, err := turn.Offered(ctx, s.cfg.Web, only(BindingWeb))
		if err != nil {
			return nil, fmt.Errorf("web tools: %w", err)
		}
		all = append(all, ts...)
	}
	if s.cfg.Brain.Tools != nil && c.Bound(BindingBrain) {
		ts, err := turn.Offered(ctx, s.cfg.Brain, only(BindingBrain))
		if err != nil {
			return nil, fmt.Errorf("brain tools: %w", err)
		}
		for _, name := range brainTools {
			for _, bt := range ts {
				if bt.Name() == name && bt.Spec().ReadOnly {
					all = append(all, bt)
				}
			}
		}
	}
	st, err := s.submitFor(t)
	if err != nil {
		return nil, fmt.Errorf("task %s of workflow %s: the stored result schema is not usable: %w", t.TaskID, t.WorkflowID, err)
	}
	return turn.NewSet(append(all, st.tool)...)
}

// Run runs one step of a task turn and publishes its step.done with the
// task's verdict. A nil error means every event is stored; any other
// error has the step delivered again, and a *bus.DeadLetter means it
// never can be processed.
//
// Everything the verdict says is read back from WORKFLOWS after the calls
// ran, never taken from memory, so a redelivered step (whose calls the
// journal answers) reaches the same verdict and finishes reporting what
// an earlier attempt began.
func (s *Service) Run(ctx context.Context, r *turn.Runner, st *protocol.Step) error {
	// Every event of the step, step.done too, under the step's span.
	ctx, span := r.Process(ctx, st)
	defer span.End()
	t, err := s.stepTask(ctx, st)
	if err != nil {
		return err
	}
	if t.Open() {
		wf, err := s.store.workflow(ctx, t.WorkflowID)
		if err != nil {
			return err
		}
		if wf.Status == WorkflowCancelled {
			// cancel_workflow is failing the workflow's tasks; this step
			// does it for its own task rather than wait.
			if t, err = s.store.failTask(ctx, t.WorkflowID, t.TaskID, ReasonWorkflowCancelled, EndedBy{TurnID: st.TurnID, Step: st.Step}, s.now()); err != nil {
				return err
			}
		}
	}
	if !t.Open() && !committedAt(t, st) {
		return s.answerEnded(ctx, r, st, t)
	}
	// An open task, or a redelivery of the step whose submit_result
	// committed it: dispatching that step again has the journal answer
	// its calls exactly as the first attempt did.
	set, err := s.taskSet(ctx, st.AgentID, st.TurnID, st.Context, t)
	if err != nil {
		return err
	}
	res, err := r.Dispatch(ctx, st, set)
	if err != nil {
		return err
	}
	v, err := s.verdict(ctx, r, st, res)
	if err != nil {
		return err
	}
	return s.stepDone(ctx, r, st, res, res.Items(), res.CompleteActorEvent, v)
}

// committedAt reports whether a call of step st committed the task.
func committedAt(t *Task, st *protocol.Step) bool {
	return t.Status == TaskAccepted && t.endedAt(st.TurnID, st.Step) && t.EndedBy.CallID != ""
}

// stepTask reads the task a step names and checks that the step is of its
// turn. A task that is not found is not there: a read that a replica
// behind misses is asked of the stream's leader (bus.Retry.KV).
func (s *Service) stepTask(ctx context.Context, st *protocol.Step) (*Task, error) {
	c := st.Context
	if !protocol.ValidID(c.WorkflowID) || !protocol.ValidID(c.TaskID) {
		return nil, &bus.DeadLetter{Reason: "a task turn step needs context.workflow_id and context.task_id"}
	}
	t, err := s.store.task(ctx, c.WorkflowID, c.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil, &bus.DeadLetter{Reason: fmt.Sprintf("workflow %s has no task %s", c.WorkflowID, c.TaskID)}
	}
	if err != nil {
		return nil, err
	}
	if err := belongs(t, st.AgentID, st.TurnID); err != nil {
		return nil, &bus.DeadLetter{Reason: err.Error()}
	}
	return t, nil
}

// answerEnded answers a step of a task that has already ended: nothing
// runs, every call gets an output saying why, and step.done repeats the
// task's outcome. Only the step that ended the task (or a redelivery of
// it) reports the end (settle), so no later step reports it again.
func (s *Service) answerEnded(ctx context.Context, r *turn.Runner, st *protocol.Step, t *Task) error {
	if t.endedAt(st.TurnID, st.Step) {
		if err := s.settle(ctx, t); err != nil {
			return err
		}
	}
	items := make([]json.RawMessage, len(st.Calls))
	for i, c := range st.Calls {
		var e *tool.Error
		switch {
		case t.Status == TaskAccepted && c.Name == SubmitResultName && c.Namespace == "":
			e = tool.Errorf(tool.Aborted, "Not recorded: this task's result had already been accepted, and a task has exactly one result. The task is complete; nothing more is needed.")
		case t.Status == TaskAccepted:
			e = tool.Errorf(tool.Aborted, "Not run: this task has already ended with its result accepted. Nothing more runs in its turn.")
		default:
			e = tool.Errorf(tool.Aborted, "Not run: this task has already ended: it failed (%s). Nothing more runs in its turn.", t.Reason)
		}
		ev := notRun(st, c, e)
		if err := r.Emitter.CallOutput(ctx, ev); err != nil {
			return fmt.Errorf("publishing call.output for %s: %w", c.CallID, err)
		}
		items[i] = ev.Item
	}
	return s.stepDone(ctx, r, st, nil, items, false, verdictOf(t))
}

// notRun is the call.output of a call that was not run.
func notRun(st *protocol.Step, c protocol.CallItem, e *tool.Error) *protocol.CallOutput {
	ev := &protocol.CallOutput{
		Type: protocol.EventCallOutput, AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step,
		CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Status: protocol.StatusError, Error: turn.CallError(e),
		Details: json.RawMessage("{}"), Events: []protocol.PresentationEvent{}, Repairs: []string{},
	}
	if c.Type == protocol.ItemToolSearchCall {
		ev.Name = "tool_search"
		ev.Item = mustJSON(protocol.ToolSearchOutput{Type: protocol.ItemToolSearchOutput, CallID: c.CallID, Execution: "client", Status: "completed", Tools: []json.RawMessage{}})
	} else {
		ev.Item = mustJSON(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: c.CallID, Output: fmt.Sprintf("Error (%s): %s", e.Kind, e.Message)})
	}
	return ev
}

// verdict decides the task's status after a step's calls ran, from the
// task record as stored now.
func (s *Service) verdict(ctx context.Context, r *turn.Runner, st *protocol.Step, res *turn.StepResult) (*protocol.Verdict, error) {
	var submitted, committed, rejected bool
	var unrecorded *tool.Error
	for _, o := range res.Outcomes {
		if o.Name != SubmitResultName || o.Namespace != "" {
			continue
		}
		submitted = true
		switch {
		case o.Err == nil:
			committed = true // this call, or a racing one, committed
		case o.Err.Kind == tool.InvalidArguments:
			rejected = true
		case unrecorded == nil:
			unrecorded = o.Err
		}
	}
	wfID, taskID := st.Context.WorkflowID, st.Context.TaskID
	t, err := s.readEnded(ctx, wfID, taskID, committed)
	if err != nil {
		return nil, err
	}
	if !t.Open() {
		return s.ended(ctx, st, t)
	}
	by := EndedBy{TurnID: st.TurnID, Step: st.Step}
	wf, err := s.store.workflow(ctx, wfID)
	if err != nil {
		return nil, err
	}
	if wf.Status == WorkflowCancelled {
		return s.fail(ctx, st, ReasonWorkflowCancelled, by)
	}
	cancelled, _, err := r.State.Cancelled(ctx, st.AgentID, st.TurnID)
	if err != nil {
		return nil, fmt.Errorf("reading the turn's cancel mark: %w", err)
	}
	if cancelled {
		return s.fail(ctx, st, ReasonTurnCancelled, by)
	}
	v := &protocol.Verdict{WorkflowID: wfID, TaskID: taskID, Status: protocol.VerdictActive}
	switch {
	case rejected:
		v.Status = protocol.VerdictRejected
	case submitted:
		// Not committed, not rejected: the store failed, the call was cut
		// short, or an earlier attempt died in it. Nothing is committed,
		// so the model may submit again.
		if unrecorded != nil {
			v.Reason = fmt.Sprintf("submit_result did not record the result (%s)", unrecorded.Kind)
		}
	case len(st.Calls) == 0:
		first, err := s.markRepair(ctx, st)
		if err != nil {
			return nil, err
		}
		if !first {
			return s.fail(ctx, st, ReasonNoSubmission, by)
		}
		v.Status, v.Instruction = protocol.VerdictRepair, repairInstruction(t)
	}
	return v, nil
}

// readEnded reads the task record. When a submission in this step was
// answered as committed, the record must show the task ended; a read
// that does not yet (a replica behind the leader) is retried briefly,
// and then the step is delivered again rather than misreported.
func (s *Service) readEnded(ctx context.Context, workflowID, taskID string, committed bool) (*Task, error) {
	for attempt := 1; ; attempt++ {
		t, err := s.store.task(ctx, workflowID, taskID)
		if err != nil || !committed || !t.Open() {
			return t, err
		}
		if attempt == 5 {
			return nil, fmt.Errorf("task %s of workflow %s was committed but reads as %s", taskID, workflowID, t.Status)
		}
		if err := pause.For(ctx, time.Duration(attempt)*20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// ended reports a task that has ended: when this step ended it, its
// events (this attempt's, or a redelivery finishing an earlier one's).
func (s *Service) ended(ctx context.Context, st *protocol.Step, t *Task) (*protocol.Verdict, error) {
	if t.endedAt(st.TurnID, st.Step) {
		if err := s.settle(ctx, t); err != nil {
			return nil, err
		}
	}
	return verdictOf(t), nil
}

// fail ends the task as failed, unless it ended meanwhile, and reports it.
func (s *Service) fail(ctx context.Context, st *protocol.Step, reason string, by EndedBy) (*protocol.Verdict, error) {
	t, err := s.store.failTask(ctx, st.Context.WorkflowID, st.Context.TaskID, reason, by, s.now())
	if err != nil {
		return nil, err
	}
	return s.ended(ctx, st, t)
}

// repairMark is the TURN_STATE value recording a task turn's one repair.
type repairMark struct {
	Step int64 `json:"step"`
}

// markRepair records the turn's repair with a create-only write and
// reports whether this step is the one that got it: true for the first
// step without a call and for redeliveries of that same step, false for
// any later step.
func (s *Service) markRepair(ctx context.Context, st *protocol.Step) (bool, error) {
	kv, err := s.store.turnState(ctx)
	if err != nil {
		return false, err
	}
	key := protocol.TurnKey(st.AgentID, st.TurnID, "repair")
	data := mustJSON(repairMark{Step: st.Step})
	_, err = kv.Create(ctx, key, data)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, fmt.Errorf("recording the repair: %w", err)
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return false, fmt.Errorf("reading the repair mark: %w", err)
	}
	var m repairMark
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		return false, fmt.Errorf("repair mark %s is unreadable: %w", key, err)
	}
	return m.Step == st.Step, nil
}

// maxInlineSchema bounds the schema quoted in the repair instruction;
// a larger one is left to the tool definition the model already has.
const maxInlineSchema = 2 << 10

// repairInstruction is the one bounded instruction a task turn gets when
// a step ends without a call.
func repairInstruction(t *Task) string {
	shape := "the schema in the submit_result tool definition"
	if len(t.ResultSchema) <= maxInlineSchema {
		shape = "this JSON Schema: " + string(t.ResultSchema)
	}
	return "You answered without calling a tool, so the task is not finished: it ends only through submit_result. " +
		"Call submit_result now with {\"result\": <value>}, where the value matches " + shape + ". " +
		"Do not answer in prose: if the next response has no function call, the task fails."
}

// stepDone publishes the step's step.done with the verdict; res, when
// the step's calls were dispatched, versions its message id for a re-sent
// step (turn.StepResult.Version).
func (s *Service) stepDone(ctx context.Context, r *turn.Runner, st *protocol.Step, res *turn.StepResult, items []json.RawMessage, complete bool, v *protocol.Verdict) error {
	if items == nil {
		items = []json.RawMessage{}
	}
	done := &protocol.StepDone{
		Type: protocol.EventStepDone, AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step,
		Items: items, EndTurn: v.Ends(), CompleteActorEvent: complete, Task: v,
	}
	if res != nil {
		res.Version(st, done)
		done.MediaNotes = res.MediaNotes()
	}
	return r.Emitter.StepDone(ctx, done)
}
