package workflowtask

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/protocol"
)

// Workflow statuses.
const (
	WorkflowRunning   = "running"
	WorkflowCompleted = "completed"
	WorkflowCancelled = "cancelled"
)

// Task statuses. A task is open while pending or ready and ended once
// accepted or failed; an ended task never changes again.
const (
	// TaskPending: stored, its task.ready event not yet confirmed.
	TaskPending = "pending"
	// TaskReady: announced with task.ready; its task turn may run.
	TaskReady    = "ready"
	TaskAccepted = "accepted"
	TaskFailed   = "failed"
)

// Failure reasons recorded on a task and reported in task.failed and
// step.done.
const (
	ReasonWorkflowCancelled = "workflow cancelled"
	ReasonTurnCancelled     = "cancelled"
	ReasonNoSubmission      = "no submission after the repair instruction"
)

// Workflow is the record of one workflow, under WorkflowKey(ID).
type Workflow struct {
	ID      string `json:"id"`
	AgentID string `json:"agent_id"`
	// TurnID is the main turn whose start_workflow call created it.
	TurnID string `json:"turn_id"`
	Title  string `json:"title,omitempty"`
	Status string `json:"status"`
	// Tasks lists the tasks in the order they were given. Their statuses
	// here are a ledger, updated with a compare-and-set after each task
	// record ends, so that exactly one update sees the last task end and
	// completes the workflow; the task records are the authority.
	Tasks []protocol.WorkflowTask `json:"tasks"`
	// Reason is why it was cancelled.
	Reason    string     `json:"reason,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Revision is the KV revision the record was read at.
	Revision uint64 `json:"-"`
}

// Task is the record of one task, under TaskKey(WorkflowID, TaskID).
type Task struct {
	WorkflowID string `json:"workflow_id"`
	TaskID     string `json:"task_id"`
	AgentID    string `json:"agent_id"`
	// TurnID is the task turn's id (TaskTurnID).
	TurnID       string `json:"turn_id"`
	Instructions string `json:"instructions"`
	// ResultSchema is the result's JSON Schema as start_workflow received
	// it (compacted). It is the only schema a submission is checked
	// against.
	ResultSchema json.RawMessage `json:"result_schema"`
	Status       string          `json:"status"`
	// Result is the committed value (accepted only).
	Result json.RawMessage `json:"result,omitempty"`
	// Reason is why the task failed (failed only).
	Reason string `json:"reason,omitempty"`
	// EndedBy names the step (and call) that ended the task, so that a
	// redelivery of that step can finish reporting it, and no other step
	// reports it again.
	EndedBy   *EndedBy   `json:"ended_by,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Revision is the KV revision the record was read at.
	Revision uint64 `json:"-"`
}

// EndedBy identifies the step that ended a task: a step of its task turn
// (accepted, failed) or of the main turn that cancelled the workflow.
type EndedBy struct {
	TurnID string `json:"turn_id"`
	Step   int64  `json:"step"`
	CallID string `json:"call_id,omitempty"`
}

// Open reports whether the task can still take a result.
func (t *Task) Open() bool { return t.Status == TaskPending || t.Status == TaskReady }

// endedAt reports whether the task was ended by step step of turn turnID.
func (t *Task) endedAt(turnID string, step int64) bool {
	return t.EndedBy != nil && t.EndedBy.TurnID == turnID && t.EndedBy.Step == step
}

func (w *Workflow) revision() uint64     { return w.Revision }
func (w *Workflow) setRevision(r uint64) { w.Revision = r }
func (t *Task) revision() uint64         { return t.Revision }
func (t *Task) setRevision(r uint64)     { t.Revision = r }

// Keys in the WORKFLOWS bucket. Ids are [A-Za-z0-9_-], so every key is a
// valid KV key and the dots separate exactly the tokens shown.
//
//	wf.<workflow_id>                 Workflow
//	task.<workflow_id>.<task_id>     Task
//	agent.<agent_id>.<workflow_id>   index entry for list_workflows

// WorkflowKey is the WORKFLOWS key of a workflow record.
func WorkflowKey(workflowID string) string { return "wf." + workflowID }

// TaskKey is the WORKFLOWS key of a task record.
func TaskKey(workflowID, taskID string) string { return "task." + workflowID + "." + taskID }

// agentKey is the index entry that lists a workflow under its agent.
func agentKey(agentID, workflowID string) string { return "agent." + agentID + "." + workflowID }

// newWorkflowID returns "wf_" followed by the creation time in
// milliseconds (12 hex digits, so ids sort by creation time) and 40
// random bits: 25 characters in all.
func newWorkflowID(now time.Time) string {
	var r [5]byte
	_, _ = rand.Read(r[:]) // crypto/rand.Read never fails
	return fmt.Sprintf("wf_%012x%s", now.UnixMilli(), hex.EncodeToString(r[:]))
}

// TaskTurnID is the turn id of a task's turn: "task_<workflow_id>_<task_id>"
// when that fits the 64 characters of an id, otherwise
// "task_<workflow_id>_" followed by 32 hex digits of the task id's
// SHA-256. Workflow ids from newWorkflowID (25 characters) leave 33 for
// the plain form. start_workflow refuses a workflow in which two tasks
// would map to one turn id.
func TaskTurnID(workflowID, taskID string) string {
	id := "task_" + workflowID + "_" + taskID
	if len(id) <= 64 {
		return id
	}
	sum := sha256.Sum256([]byte(taskID))
	id = "task_" + workflowID + "_" + hex.EncodeToString(sum[:16])
	if len(id) > 64 {
		// Only a workflow id longer than newWorkflowID makes can get here.
		sum := sha256.Sum256([]byte(workflowID + "." + taskID))
		id = "task_" + hex.EncodeToString(sum[:16])
	}
	return id
}

// subjectOf is the WORKFLOW_EVENTS subject of a workflow's events.
func subjectOf(workflowID string) string { return protocol.PrefixWFEvt + "." + workflowID }

// eventMsgID joins the parts of an event's Nats-Msg-Id with dots.
func eventMsgID(parts ...string) string { return strings.Join(parts, ".") }
