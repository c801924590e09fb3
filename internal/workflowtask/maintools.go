package workflowtask

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Names of the main-turn workflow tools.
const (
	StartWorkflowName  = "start_workflow"
	ShowWorkflowName   = "show_workflow"
	ListWorkflowsName  = "list_workflows"
	CancelWorkflowName = "cancel_workflow"
)

// StartParams are start_workflow's parameters.
type StartParams struct {
	Title string      `json:"title,omitempty" jsonschema:"description=A short title for the workflow\\, shown in lists.,maxLength=200"`
	Tasks []TaskInput `json:"tasks" jsonschema:"description=The tasks. Each runs in its own isolated turn\\, all at once\\, and ends by submitting a result that matches its result schema.,minItems=1"`
}

// TaskInput is one task given to start_workflow.
type TaskInput struct {
	ID           string          `json:"id" jsonschema:"description=The task's id\\, unique in the workflow.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
	Instructions string          `json:"instructions" jsonschema:"description=Everything the task's turn needs to know: it sees nothing else of this conversation.,minLength=1,maxLength=32000"`
	ResultSchema json.RawMessage `json:"result_schema" jsonschema:"type=object,description=The JSON Schema the task's result must match. It must be self-contained (no $ref) and usable in strict mode: objects list their properties and do not allow additional ones; no allOf/oneOf/not."`
}

// ShowParams are show_workflow's parameters.
type ShowParams struct {
	WorkflowID string `json:"workflow_id" jsonschema:"description=The workflow's id\\, as start_workflow or list_workflows gave it.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
}

// ListParams are list_workflows' parameters.
type ListParams struct {
	Status string `json:"status,omitempty" jsonschema:"description=Only workflows with this status.,enum=running,enum=completed,enum=cancelled"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=How many to list\\, newest first (default 20).,minimum=1,maximum=100"`
}

// CancelParams are cancel_workflow's parameters.
type CancelParams struct {
	WorkflowID string `json:"workflow_id" jsonschema:"description=The workflow to cancel.,pattern=^[A-Za-z0-9_-]{1\\,64}$"`
	Reason     string `json:"reason,omitempty" jsonschema:"description=Why it is cancelled; recorded and reported.,maxLength=500"`
}

// Category returns the category "workflows" of the main-turn workflow
// tools: start_workflow, show_workflow, list_workflows and
// cancel_workflow, in that order, for every main turn. A task turn never
// gets them (its catalog is taskSet's).
func (s *Service) Category() tool.Category {
	return tool.Category{Name: "workflows", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return s.main, nil }}
}

// mainTools defines the main-turn tools once; every main turn shares them.
func (s *Service) mainTools() []*tool.Tool {
	return []*tool.Tool{
		tool.Must(tool.Def[StartParams]{
			Spec: tool.Spec{Name: StartWorkflowName,
				NotStrict: "each task's result_schema is any JSON Schema object: strict mode would close it to {}",
				Description: "Start a workflow of tasks that run in parallel, each in its own isolated turn with only web and read-only memory tools. " +
					"Each task gets its instructions and must submit a result matching its result schema. " +
					"Returns the workflow id at once; the results arrive as the tasks finish (see show_workflow)."},
			Activity: func(p StartParams) string { return fmt.Sprintf("Starting a workflow of %d tasks", len(p.Tasks)) },
			Execute:  s.startWorkflow,
		}),
		tool.Must(tool.Def[ShowParams]{
			Spec:     tool.Spec{Name: ShowWorkflowName, Description: "Show a workflow: its status and each task's status, result or failure reason.", ReadOnly: true},
			Activity: func(p ShowParams) string { return "Reading workflow " + p.WorkflowID },
			Execute:  s.showWorkflow,
		}),
		tool.Must(tool.Def[ListParams]{
			Spec:     tool.Spec{Name: ListWorkflowsName, Description: "List this agent's workflows, newest first, with their status and task counts.", ReadOnly: true},
			Activity: func(ListParams) string { return "Listing workflows" },
			Execute:  s.listWorkflows,
		}),
		tool.Must(tool.Def[CancelParams]{
			Spec: tool.Spec{Name: CancelWorkflowName,
				Description: "Cancel a running workflow: its unfinished tasks fail and their results are never recorded. This cannot be undone.",
				Destructive: true, ExecutionMode: tool.Sequential},
			Activity: func(p CancelParams) string { return "Cancelling workflow " + p.WorkflowID },
			Execute:  s.cancelWorkflow,
		}),
	}
}

// startedTask is one task as start_workflow reports it.
type startedTask struct {
	TaskID string `json:"task_id"`
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
}

// startWorkflow checks every task, its id and its result schema, before
// storing anything; then stores the workflow and announces it and each
// task. All tasks are ready at once: they run in parallel.
func (s *Service) startWorkflow(ctx context.Context, p StartParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if len(p.Tasks) > s.cfg.MaxTasks {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "A workflow has at most %d tasks; %d were given. Split the work or combine tasks.", s.cfg.MaxTasks, len(p.Tasks))
	}
	now := s.now()
	wf := &Workflow{ID: newWorkflowID(now), AgentID: call.AgentID, TurnID: call.TurnID, Title: p.Title, Status: WorkflowRunning, CreatedAt: now}
	var problems []string
	seen := map[string]int{}
	turns := map[string]string{}
	tasks := make([]*Task, 0, len(p.Tasks))
	for i, in := range p.Tasks {
		at := fmt.Sprintf("/tasks/%d", i)
		if !protocol.ValidID(in.ID) {
			problems = append(problems, fmt.Sprintf("- %s/id: %q is not 1-64 characters of [A-Za-z0-9_-]", at, in.ID))
			continue
		}
		if j, dup := seen[in.ID]; dup {
			problems = append(problems, fmt.Sprintf("- %s/id: %q is also the id of /tasks/%d; task ids must be unique", at, in.ID, j))
			continue
		}
		seen[in.ID] = i
		if strings.TrimSpace(in.Instructions) == "" {
			problems = append(problems, fmt.Sprintf("- %s/instructions: empty", at))
		}
		if len(in.ResultSchema) > s.cfg.MaxSchemaBytes {
			problems = append(problems, fmt.Sprintf("- %s/result_schema: %d bytes, over the %d byte limit", at, len(in.ResultSchema), s.cfg.MaxSchemaBytes))
			continue
		}
		t := &Task{WorkflowID: wf.ID, TaskID: in.ID, AgentID: call.AgentID, TurnID: TaskTurnID(wf.ID, in.ID),
			Instructions: in.Instructions, Status: TaskPending, CreatedAt: now}
		if other, dup := turns[t.TurnID]; dup {
			problems = append(problems, fmt.Sprintf("- %s/id: %q and %q would share a turn id; rename one", at, in.ID, other))
			continue
		}
		turns[t.TurnID] = in.ID
		// The schema is checked by building the very submit_result the
		// task turn will get, strict, as the provider will see it.
		if _, err := s.newSubmit(wf.ID, in.ID, in.ResultSchema); err != nil {
			problems = append(problems, fmt.Sprintf("- %s/result_schema: not usable as a strict result schema: %v", at, err))
			continue
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, in.ResultSchema) // valid: newSubmit compiled it
		t.ResultSchema = compact.Bytes()
		tasks = append(tasks, t)
		wf.Tasks = append(wf.Tasks, protocol.WorkflowTask{TaskID: t.TaskID, TurnID: t.TurnID, Status: TaskReady})
	}
	if len(problems) > 0 {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments,
			"Nothing was started. Fix these and call start_workflow again:\n%s", strings.Join(problems, "\n"))
	}
	if err := s.store.create(ctx, wf, tasks); err != nil {
		return tool.Result{}, fmt.Errorf("the workflow could not be stored, so it was not started: %w", err)
	}
	if err := s.announce(ctx, wf, tasks); err != nil {
		return tool.Result{}, fmt.Errorf("workflow %s is stored but could not be announced (%w); cancel it with cancel_workflow and start it again", wf.ID, err)
	}
	out := struct {
		WorkflowID string        `json:"workflow_id"`
		Status     string        `json:"status"`
		Tasks      []startedTask `json:"tasks"`
	}{WorkflowID: wf.ID, Status: wf.Status}
	for _, t := range tasks {
		out.Tasks = append(out.Tasks, startedTask{TaskID: t.TaskID, TurnID: t.TurnID, Status: TaskReady})
	}
	return tool.Result{
		Content: fmt.Sprintf("Started workflow %s with %d tasks; they run in parallel. Results arrive as tasks finish; show_workflow reports progress.\n%s",
			wf.ID, len(tasks), mustJSON(out)),
		Details: out,
	}, nil
}

// announce publishes workflow.started, then task.ready for each task and
// marks it ready. The ledger in the workflow record already says ready:
// the ledger only tells ended tasks from open ones.
func (s *Service) announce(ctx context.Context, wf *Workflow, tasks []*Task) error {
	if err := s.publish(ctx, workflowEvent(protocol.EventWorkflowStarted, wf)); err != nil {
		return err
	}
	for _, t := range tasks {
		ev := &protocol.WorkflowEvent{Type: protocol.EventTaskReady, WorkflowID: t.WorkflowID, AgentID: t.AgentID, TurnID: t.TurnID, TaskID: t.TaskID,
			Instructions: t.Instructions, Time: t.CreatedAt}
		if err := s.publish(ctx, ev); err != nil {
			return err
		}
		if err := s.store.markReady(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// ownWorkflow reads a workflow of the calling agent. Another agent's
// workflow is reported as not found.
func (s *Service) ownWorkflow(ctx context.Context, agentID, id string) (*Workflow, error) {
	wf, err := s.store.workflow(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && wf.AgentID != agentID) {
		return nil, tool.Errorf(tool.ToolError, "There is no workflow %s for this agent. list_workflows shows the ones there are.", id)
	}
	return wf, err
}

// taskView is a task as show_workflow reports it.
type taskView struct {
	TaskID string          `json:"task_id"`
	TurnID string          `json:"turn_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Reason string          `json:"reason,omitempty"`
}

// workflowView is a workflow as show_workflow reports it.
type workflowView struct {
	WorkflowID string     `json:"workflow_id"`
	Title      string     `json:"title,omitempty"`
	Status     string     `json:"status"`
	Reason     string     `json:"reason,omitempty"`
	CreatedAt  string     `json:"created_at"`
	Tasks      []taskView `json:"tasks"`
}

// maxShownResult bounds one result quoted back by show_workflow.
const maxShownResult = 8 << 10

func (s *Service) showWorkflow(ctx context.Context, p ShowParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	wf, err := s.ownWorkflow(ctx, call.AgentID, p.WorkflowID)
	if err != nil {
		return tool.Result{}, err
	}
	ts, err := s.store.tasks(ctx, wf)
	if err != nil {
		return tool.Result{}, err
	}
	v := workflowView{WorkflowID: wf.ID, Title: wf.Title, Status: wf.Status, Reason: wf.Reason, CreatedAt: wf.CreatedAt.Format("2006-01-02T15:04:05Z")}
	var notes []string
	for _, t := range ts {
		tv := taskView{TaskID: t.TaskID, TurnID: t.TurnID, Status: t.Status, Result: t.Result, Reason: t.Reason}
		if len(tv.Result) > maxShownResult {
			tv.Result = nil
			notes = append(notes, fmt.Sprintf("The result of %s is %d bytes and is left out here.", t.TaskID, len(t.Result)))
		}
		v.Tasks = append(v.Tasks, tv)
	}
	content := string(mustJSON(v))
	if len(notes) > 0 {
		content += "\n" + strings.Join(notes, "\n")
	}
	return tool.Result{Content: content, Details: v}, nil
}

// workflowSummary is a workflow as list_workflows reports it.
type workflowSummary struct {
	WorkflowID string         `json:"workflow_id"`
	Title      string         `json:"title,omitempty"`
	Status     string         `json:"status"`
	CreatedAt  string         `json:"created_at"`
	Tasks      map[string]int `json:"tasks"` // count by status
}

func (s *Service) listWorkflows(ctx context.Context, p ListParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 20
	}
	ids, err := s.store.agentWorkflows(ctx, call.AgentID)
	if err != nil {
		return tool.Result{}, err
	}
	list := []workflowSummary{}
	for _, id := range ids {
		if len(list) == limit {
			break
		}
		wf, err := s.store.workflow(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue // an index entry whose workflow was removed
		}
		if err != nil {
			return tool.Result{}, err
		}
		if p.Status != "" && wf.Status != p.Status {
			continue
		}
		sum := workflowSummary{WorkflowID: wf.ID, Title: wf.Title, Status: wf.Status, CreatedAt: wf.CreatedAt.Format("2006-01-02T15:04:05Z"), Tasks: map[string]int{}}
		for _, t := range wf.Tasks {
			sum.Tasks[t.Status]++
		}
		list = append(list, sum)
	}
	return tool.Result{Content: string(mustJSON(map[string]any{"workflows": list})), Details: list}, nil
}

// cancelWorkflow marks the workflow cancelled, fails its open tasks, and
// reports each (task.failed) and then the workflow (workflow.cancelled).
// Calling it again on a cancelled workflow finishes a cancel that was cut
// short and reports it again; the events' ids make that harmless.
func (s *Service) cancelWorkflow(ctx context.Context, p CancelParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if _, err := s.ownWorkflow(ctx, call.AgentID, p.WorkflowID); err != nil {
		return tool.Result{}, err
	}
	reason := p.Reason
	if reason == "" {
		reason = "cancelled by the agent"
	}
	now := s.now()
	already := false
	wf, err := s.store.updateWorkflow(ctx, p.WorkflowID, func(wf *Workflow) (bool, error) {
		already = wf.Status == WorkflowCancelled
		if wf.Status != WorkflowRunning {
			return false, nil
		}
		wf.Status, wf.Reason, wf.EndedAt = WorkflowCancelled, reason, &now
		return true, nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	if wf.Status == WorkflowCompleted {
		return tool.Result{}, tool.Errorf(tool.ToolError, "Workflow %s has already completed: every task ended, so there is nothing to cancel.", wf.ID)
	}
	by := EndedBy{TurnID: call.TurnID, Step: int64(call.Step), CallID: call.CallID}
	final := map[string]string{}
	for _, ref := range wf.Tasks {
		t, err := s.store.failTask(ctx, wf.ID, ref.TaskID, ReasonWorkflowCancelled, by, now)
		if err != nil {
			return tool.Result{}, err
		}
		final[t.TaskID] = t.Status
		if t.Status == TaskFailed && t.Reason == ReasonWorkflowCancelled {
			if err := s.publish(ctx, taskEvent(t)); err != nil {
				return tool.Result{}, err
			}
		}
	}
	wf, err = s.store.updateWorkflow(ctx, wf.ID, func(wf *Workflow) (bool, error) {
		changed := false
		for i := range wf.Tasks {
			if st := final[wf.Tasks[i].TaskID]; st != "" && wf.Tasks[i].Status != st {
				wf.Tasks[i].Status = st
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	if err := s.publish(ctx, workflowEvent(protocol.EventWorkflowCancelled, wf)); err != nil {
		return tool.Result{}, err
	}
	what := "Cancelled workflow %s (%s). Tasks that had not finished have failed.\n%s"
	if already {
		what = "Workflow %s had already been cancelled (%s); its tasks stand as follows.\n%s"
	}
	return tool.Result{Content: fmt.Sprintf(what, wf.ID, wf.Reason, mustJSON(wf.Tasks)), Details: wf.Tasks}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs and valid JSON reach here
	}
	return b
}
