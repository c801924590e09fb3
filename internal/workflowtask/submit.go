package workflowtask

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// SubmitResultName is the name of the tool that ends a task.
const SubmitResultName = "submit_result"

const submitDescription = "Submit this task's result; this is the only way to finish the task. " +
	"Put the value in \"result\": it must match the task's result schema. It is checked against the stored schema and committed, " +
	"and once it is accepted the task is done and the turn ends. A rejected value comes back with every violation and its JSON pointer: " +
	"fix them and call submit_result again."

// SubmitParameters returns submit_result's parameters for a task's result
// schema: an object with the one required property "result" holding it.
func SubmitParameters(resultSchema json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, resultSchema); err != nil {
		return nil, fmt.Errorf("the result schema is not valid JSON: %w", err)
	}
	return json.RawMessage(`{"type":"object","properties":{"result":` + b.String() + `},"required":["result"],"additionalProperties":false}`), nil
}

// submitParams are submit_result's parameters. Result is validated against
// the schema before Execute sees it, and validated again against the
// stored schema before it is committed.
type submitParams struct {
	Result json.RawMessage `json:"result"`
}

// submitTool is one task's submit_result with the validator of its stored
// schema (the same wrapper, compiled as given rather than strict).
type submitTool struct {
	tool  *tool.Tool
	check *schema.Params
}

// submitCache keeps the compiled submit_result of recent tasks: every step
// and catalog request of a task turn needs it, and compiling a schema
// costs more than a map lookup. It is bounded; a full cache starts over.
type submitCache struct {
	mu sync.Mutex
	m  map[string]*submitTool
}

const submitCacheSize = 1024

// submitFor returns the submit_result of a task, built from the result
// schema in its record. The key includes the schema's digest, so a record
// can never be answered with a tool built from another schema.
func (s *Service) submitFor(t *Task) (*submitTool, error) {
	sum := sha256.Sum256(t.ResultSchema)
	key := t.WorkflowID + "/" + t.TaskID + "/" + hex.EncodeToString(sum[:])
	s.submit.mu.Lock()
	st, ok := s.submit.m[key]
	s.submit.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := s.newSubmit(t.WorkflowID, t.TaskID, t.ResultSchema)
	if err != nil {
		return nil, err
	}
	s.submit.mu.Lock()
	if s.submit.m == nil || len(s.submit.m) >= submitCacheSize {
		s.submit.m = make(map[string]*submitTool)
	}
	s.submit.m[key] = st
	s.submit.mu.Unlock()
	return st, nil
}

// newSubmit builds a task's submit_result. An error says why the result
// schema cannot be used (start_workflow refuses such a task).
func (s *Service) newSubmit(workflowID, taskID string, resultSchema json.RawMessage) (*submitTool, error) {
	params, err := SubmitParameters(resultSchema)
	if err != nil {
		return nil, err
	}
	check, err := schema.Compile(params, false)
	if err != nil {
		return nil, err
	}
	t, err := tool.New(tool.Def[submitParams]{
		Spec: tool.Spec{
			Name: SubmitResultName, Description: submitDescription,
			JSONSchema: params, Strict: true,
			// A commit is final: no repair rung may invent or drop part of
			// a result, and no two submissions of a step run at once.
			Destructive: true, ExecutionMode: tool.Sequential,
		},
		Activity: func(submitParams) string { return "Submitting the result" },
		Execute: func(ctx context.Context, p submitParams) (tool.Result, error) {
			return s.commit(ctx, workflowID, taskID, p.Result)
		},
	})
	if err != nil {
		return nil, err
	}
	return &submitTool{tool: t, check: check}, nil
}

// validate checks a submitted value against the stored schema and lists
// every violation with its JSON pointer into the arguments.
func (st *submitTool) validate(result json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(result))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return tool.Errorf(tool.InvalidArguments, "The result is not valid JSON: %v. Call submit_result again with the complete value.", err)
	}
	err := st.check.Validate(map[string]any{"result": v})
	if err == nil {
		return nil
	}
	var ve *schema.ValidationError
	if !errors.As(err, &ve) {
		return tool.Errorf(tool.InvalidArguments, "The result was rejected: %v", err)
	}
	return tool.Errorf(tool.InvalidArguments, "%s", violationsText(ve))
}

// violationsText is what the model reads about a rejected result.
func violationsText(ve *schema.ValidationError) string {
	var b strings.Builder
	b.WriteString("The result does not match the task's result schema and was not recorded.\nViolations (JSON pointer: problem):\n")
	tools.WriteViolations(&b, ve.Violations)
	b.WriteString("Fix every violation and call submit_result again.")
	return b.String()
}

// submitDetails are submit_result's details, for logs and interfaces.
type submitDetails struct {
	WorkflowID string `json:"workflow_id"`
	TaskID     string `json:"task_id"`
	// Committed is true only for the call whose value was committed.
	Committed bool   `json:"committed"`
	Status    string `json:"status"`
}

// commit is submit_result's work: the value is validated again against
// the schema in the task record (never one from the message) and written
// with a compare-and-set that only succeeds on an open task. Of any
// number of racing submissions exactly one commits; the others find the
// task accepted and are told so, with nothing written.
func (s *Service) commit(ctx context.Context, workflowID, taskID string, result json.RawMessage) (tool.Result, error) {
	call, ok := tool.CallFrom(ctx)
	if !ok {
		return tool.Result{}, tool.Errorf(tool.Internal, "submit_result ran without a call identity")
	}
	details := submitDetails{WorkflowID: workflowID, TaskID: taskID}
	if len(result) > s.cfg.MaxResultBytes {
		return tool.Result{Details: details}, tool.Errorf(tool.InvalidArguments,
			"The result is %d bytes, over the %d byte limit, and was not recorded. Submit a smaller result.", len(result), s.cfg.MaxResultBytes)
	}
	wf, err := s.store.workflow(ctx, workflowID)
	if err != nil {
		return tool.Result{Details: details}, unrecorded(err)
	}
	if wf.Status == WorkflowCancelled {
		details.Status = TaskFailed
		return tool.Result{Details: details}, tool.Errorf(tool.ToolError, "Not recorded: the workflow was cancelled, so this task has ended without a result.")
	}
	by := EndedBy{TurnID: call.TurnID, Step: int64(call.Step), CallID: call.CallID}
	now := s.now()
	t, err := s.store.updateTask(ctx, workflowID, taskID, func(t *Task) (bool, error) {
		if t.AgentID != call.AgentID || t.TurnID != call.TurnID {
			return false, tool.Errorf(tool.Internal, "this turn (%s) is not the task's turn", call.TurnID)
		}
		if !t.Open() {
			return false, nil
		}
		st, err := s.submitFor(t)
		if err != nil {
			return false, tool.Errorf(tool.Internal, "the stored result schema is not usable: %v", err)
		}
		if err := st.validate(result); err != nil {
			return false, err
		}
		var b bytes.Buffer
		if err := json.Compact(&b, result); err != nil {
			return false, tool.Errorf(tool.InvalidArguments, "The result is not valid JSON: %v", err)
		}
		t.Status, t.Result, t.EndedBy, t.EndedAt = TaskAccepted, b.Bytes(), &by, &now
		return true, nil
	})
	if err != nil {
		var te *tool.Error
		if errors.As(err, &te) {
			return tool.Result{Details: details}, te
		}
		return tool.Result{Details: details}, unrecorded(err)
	}
	details.Status = t.Status
	switch {
	case t.Status == TaskAccepted && t.EndedBy != nil && *t.EndedBy == by:
		details.Committed = true
		return tool.Result{Content: "Accepted: the result matches the task's result schema and is committed. The task is complete.", Details: details, EndTurn: true}, nil
	case t.Status == TaskAccepted:
		return tool.Result{Content: "Not recorded: this task's result had already been accepted from an earlier submission, and a task has exactly one result. The task is complete; nothing more is needed.",
			Details: details, EndTurn: true}, nil
	default:
		return tool.Result{Details: details}, tool.Errorf(tool.ToolError, "Not recorded: this task has already ended as %s (%s).", t.Status, t.Reason)
	}
}

// unrecorded is the model's answer when the store failed under a commit.
func unrecorded(err error) *tool.Error {
	return tool.Errorf(tool.Internal, "The result could not be recorded (%v). Call submit_result again with the same value.", err)
}
