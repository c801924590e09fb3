package gateway

import (
	"encoding/json"
	"time"

	"github.com/agentbull/toolruntime/protocol"
)

// The wire types below are the gateway's view of the messages the
// workers publish. Their JSON is the worker's, field for field (a test
// round-trips each against the worker's own type); byte strings the model
// reads or wrote are json.RawMessage, passed on as they came.

// Context is what a turn's tool set is assembled from, sent with the
// catalog request and with every step: Kind ([KindText] or
// [KindWorkflowTask]), Bindings (web, brain, computer, schedules,
// background_jobs, todo, …), Skills, MCPServers, and for a task turn
// WorkflowID and TaskID, Approval ([ApprovalScope]), and Fairness
// ([Fairness], protocol 1.2). A binding can only narrow what the worker
// was configured with. It is the worker's own type: one definition of
// what the worker parses.
type Context = protocol.Context

// Fairness is a Context's Fairness (protocol 1.2): the share of the fleet
// the turn's steps and catalog requests draw from. Steps with the same
// Key (1-64 characters of [A-Za-z0-9_.:-]; empty: the step's agent id)
// share one share, served in proportion to Weight (0.01 to 100; zero:
// 1) while other keys have work waiting: a tenant's agents, or a
// priority class. Set it on every step of a turn and on its catalog
// request. [Client.Send] refuses a malformed one with [ErrMalformedStep]
// (the workers would dead-letter the step), as the workers' own parser
// does; the zero value is the default.
type Fairness = protocol.Fairness

// ApprovalScope is a Context's Approval (protocol 1.1): the calls the
// workers hold for a person's approval in this turn, beside those their
// own policy holds (it adds, never removes). Level [ApprovalDestructive]
// or [ApprovalAll], or Names of tools ("name", "namespace.name",
// "namespace.*"); the zero value adds nothing. Held calls come as a
// [StepPending]; [Catalog].Approval lists the tools they would be.
type ApprovalScope = protocol.ApprovalScope

// Approval levels, in ApprovalScope.Level.
const (
	ApprovalDestructive = protocol.ApprovalDestructive
	ApprovalAll         = protocol.ApprovalAll
)

// Turn kinds, in [Context].Kind.
const (
	KindText         = "text"
	KindWorkflowTask = "workflow_task"
)

// Catalog is a turn's tool list, as the worker built it for the turn's
// context.
type Catalog struct {
	// Tools is the JSON array of Responses API tool definitions, as the
	// worker sent it. Send these bytes to the model unchanged (with
	// openai-go: param.Override): the same context gives the same bytes,
	// which keeps the provider's prompt cache.
	Tools json.RawMessage `json:"tools"`
	// Digest is the sha256 hex of Tools; the client checked it.
	Digest string `json:"digest"`
	// Notes tell about sources that could not contribute (an MCP server
	// that is down); the catalog is still usable.
	Notes []string `json:"notes,omitempty"`
	// Approval names the tools whose calls wait for a person's approval
	// ("name" or "namespace.name").
	Approval []string `json:"approval,omitempty"`
}

// Definitions splits Tools into its entries, each the worker's bytes.
func (c *Catalog) Definitions() ([]json.RawMessage, error) {
	var defs []json.RawMessage
	if err := json.Unmarshal(c.Tools, &defs); err != nil {
		return nil, err
	}
	return defs, nil
}

// Step is one model response of a turn, as the gateway publishes it.
type Step struct {
	AgentID string
	TurnID  string
	// Step numbers the model responses of a turn: 0, 1, 2, …
	Step int64
	// Context is the turn's context; its Kind decides the subject
	// (turn.call for a main turn, turn.task for a task turn).
	Context Context
	// Output is the model response's output array, item by item, as the
	// provider returned it: messages, reasoning, function_call and
	// tool_search_call items alike.
	Output []json.RawMessage
}

// Event is what [StepRun.Next] returns: a *CallOutput, *StepDone,
// *StepPending or *Activity.
type Event interface{ event() }

// CallOutput is published as soon as one call of the step ended.
type CallOutput struct {
	AgentID   string `json:"agent_id"`
	TurnID    string `json:"turn_id"`
	Step      int64  `json:"step"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Status is StatusOK or StatusError; on error, Error says why.
	Status string     `json:"status"`
	Error  *CallError `json:"error"`
	// Item is the function_call_output (or tool_search_output) item for
	// the model. It is there on errors too: its text says what to fix.
	Item json.RawMessage `json:"item"`
	// Details is structured data for logs and user interfaces, never for
	// the model; Events are the tool's presentation events.
	Details json.RawMessage     `json:"details"`
	Events  []PresentationEvent `json:"events"`
	// Repairs names the repair-ladder rungs that made the arguments
	// parse, in order.
	Repairs    []string `json:"repairs"`
	Activity   string   `json:"activity"`
	DurationMS int64    `json:"duration_ms"`
}

// Call statuses, in [CallOutput].Status.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// CallError is why a call did not succeed.
type CallError struct {
	Kind ErrorKind `json:"kind"`
	// Message is written for the model.
	Message string `json:"message"`
}

// Error makes a CallError an error: "kind: message".
func (e *CallError) Error() string { return string(e.Kind) + ": " + e.Message }

// ErrorKind classifies a call's error: one of the constants below.
type ErrorKind string

// Error kinds of a [CallError].
const (
	UnknownTool      ErrorKind = "unknown_tool"
	NotLoaded        ErrorKind = "not_loaded"
	InvalidArguments ErrorKind = "invalid_arguments"
	ToolError        ErrorKind = "tool_error"
	Timeout          ErrorKind = "timeout"
	Aborted          ErrorKind = "aborted"
	Interrupted      ErrorKind = "interrupted"
	Rejected         ErrorKind = "rejected"
	Internal         ErrorKind = "internal"
)

// PresentationEvent is a tool's event for user interfaces.
type PresentationEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// StepDone is the one event that closes a step.
type StepDone struct {
	AgentID string `json:"agent_id"`
	TurnID  string `json:"turn_id"`
	Step    int64  `json:"step"`
	// Items holds one output item per call, in the order of the calls:
	// append them to the conversation as they are.
	Items []json.RawMessage `json:"items"`
	// EndTurn is set when a tool ended the turn, the turn was cancelled,
	// or a task turn ended; otherwise call the model again.
	EndTurn bool `json:"end_turn"`
	// CompleteActorEvent is set when a call's tool marked the actor event
	// the turn answers (the message or event that started it) as done
	// (tool.Result.CompleteActorEvent); what that means is the
	// gateway's: the workers only pass it on.
	CompleteActorEvent bool `json:"complete_actor_event"`
	// Task is the verdict of a task turn's step; nil in a main turn.
	Task *Verdict `json:"task"`
}

// Verdict is what a task turn's step came to.
type Verdict struct {
	WorkflowID string `json:"workflow_id"`
	TaskID     string `json:"task_id"`
	// Status is one of the Verdict* constants.
	Status string `json:"status"`
	// Result is the committed value (VerdictAccepted).
	Result json.RawMessage `json:"result,omitempty"`
	// Instruction is the one repair instruction (VerdictRepair): send it
	// to the model as the next user message.
	Instruction string `json:"instruction,omitempty"`
	// Reason says why the task failed (VerdictFailed), or why a
	// submission was not recorded (VerdictActive).
	Reason string `json:"reason,omitempty"`
}

// Verdict statuses, in [Verdict].Status.
const (
	// VerdictAccepted: the result is committed; the turn ends.
	VerdictAccepted = "accepted"
	// VerdictRejected: a submission broke the result schema; the call's
	// output lists each violation, and the turn goes on.
	VerdictRejected = "rejected"
	// VerdictRepair: the step called nothing; send Instruction.
	VerdictRepair = "repair"
	// VerdictFailed: the task failed (Reason); the turn ends.
	VerdictFailed = "failed"
	// VerdictActive: tools were called but nothing was submitted.
	VerdictActive = "active"
)

// StepPending is published, once, for a step whose calls wait for a
// person's approval: nothing of the step has run. Answer it with
// [Client.Decide]; the step's call outputs and step.done follow.
type StepPending struct {
	AgentID   string        `json:"agent_id"`
	TurnID    string        `json:"turn_id"`
	Step      int64         `json:"step"`
	Approvals []PendingCall `json:"approvals"`
	// ExpiresAt is when the pending calls are rejected unanswered.
	ExpiresAt time.Time `json:"expires_at"`
}

// PendingCall is one call waiting for approval.
type PendingCall struct {
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Arguments is the validated (and, where allowed, repaired) value:
	// exactly what runs if approved. Show it to the person.
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason"`
	Activity  string          `json:"activity"`
}

// Decision approves or refuses one pending call.
type Decision struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	// Reason is told to the model when the call is refused.
	Reason string `json:"reason,omitempty"`
}

// Activity is a running call's progress, for display: State is
// ActivityStarted, ActivityProgress (with Progress) or
// ActivityCompleted.
type Activity struct {
	CallID   string    `json:"call_id"`
	Name     string    `json:"name"`
	State    string    `json:"state"`
	Label    string    `json:"label"`
	Progress *Progress `json:"progress,omitempty"`
}

// Activity states, in [Activity].State.
const (
	ActivityStarted   = "started"
	ActivityProgress  = "progress"
	ActivityCompleted = "completed"
)

// Progress is how far a running call is; Total is nil when unknown.
type Progress struct {
	Done  int64  `json:"done"`
	Total *int64 `json:"total,omitempty"`
}

func (*CallOutput) event()  {}
func (*StepDone) event()    {}
func (*StepPending) event() {}
func (*Activity) event()    {}

// WorkflowEvent is an event on workflow.event.<workflow_id>. Which fields
// are set depends on Type: TaskID and Instructions for task.ready, Result
// for task.accepted, Reason for task.failed and workflow.cancelled,
// Tasks for workflow.*. TurnID is the task turn's id in task.* events and
// the main turn that started the workflow in workflow.* events.
type WorkflowEvent struct {
	Type         string          `json:"type"`
	WorkflowID   string          `json:"workflow_id"`
	AgentID      string          `json:"agent_id"`
	TurnID       string          `json:"turn_id"`
	TaskID       string          `json:"task_id,omitempty"`
	Title        string          `json:"title,omitempty"`
	Instructions string          `json:"instructions,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	Tasks        []WorkflowTask  `json:"tasks,omitempty"`
	Time         time.Time       `json:"time"`
}

// WorkflowTask is a task's status in a workflow.* event.
type WorkflowTask struct {
	TaskID string `json:"task_id"`
	TurnID string `json:"turn_id"`
	Status string `json:"status"`
}

// Workflow event types, in [WorkflowEvent].Type.
const (
	EventWorkflowStarted   = "workflow.started"
	EventTaskReady         = "task.ready"
	EventTaskAccepted      = "task.accepted"
	EventTaskFailed        = "task.failed"
	EventWorkflowCompleted = "workflow.completed"
	EventWorkflowCancelled = "workflow.cancelled"
)

// TaskContext is the context of the task turn a task.ready event starts,
// with the given bindings (only web and brain count in a task turn).
func (e *WorkflowEvent) TaskContext(bindings map[string]bool) Context {
	return Context{Kind: KindWorkflowTask, Bindings: bindings, WorkflowID: e.WorkflowID, TaskID: e.TaskID}
}
