package protocol

import (
	"encoding/json"
	"strconv"
	"time"
)

// Protocol 1.1 approvals: the names and the shapes on the wire. What the
// worker does with them is internal/turn's and internal/engine's.
const (
	EventStepPending  = "step.pending"
	StreamApprovals   = "TURN_APPROVALS"
	ConsumerApprovals = "approval-workers"
	PrefixApproval    = "turn.approval"
	ApprovalTimedOut  = "approval timed out"
	ActivityProgress  = "progress"
	ActivityStarted   = "started"
	ActivityCompleted = "completed"
)

// StepPending is published, once, for a step whose calls wait for a
// person: nothing of the step has run.
type StepPending struct {
	Type      string        `json:"type"`
	AgentID   string        `json:"agent_id"`
	TurnID    string        `json:"turn_id"`
	Step      int64         `json:"step"`
	Approvals []PendingCall `json:"approvals"`
	ExpiresAt time.Time     `json:"expires_at"`
}

// PendingCall is one call of a pending step: Arguments is the validated
// (and, where allowed, repaired) value, exactly what runs if approved.
type PendingCall struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments json.RawMessage `json:"arguments"`
	Reason    string          `json:"reason"`
	Activity  string          `json:"activity"`
	// ReadOnly and Destructive are the tool's flags (Spec.ReadOnly,
	// Spec.Destructive), for the person who decides.
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	// InputRequest is what a tool's server asks a person (1.3), on an
	// entry whose Reason is PendingInput; nil on an approval.
	InputRequest *InputRequest `json:"input_request,omitempty"`
}

// PendingInput is the Reason of a pending entry whose call is held,
// mid-run, for a person's input (1.3): an MCP server's input_required
// result or elicitation.
const PendingInput = "input"

// InputRequest is what a held call's server asks: a message for the
// person and the JSON Schema the answer's input must be valid against
// (an object schema of flat, primitive properties, as MCP elicitation
// allows).
type InputRequest struct {
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requested_schema"`
}

// Approval is a gateway's answer for a pending step, published on
// turn.approval.<agent_id>.<turn_id>.
type Approval struct {
	AgentID   string     `json:"agent_id"`
	TurnID    string     `json:"turn_id"`
	Step      int64      `json:"step"`
	Decisions []Decision `json:"decisions"`
}

// Decision approves or refuses one pending call.
type Decision struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	// Input answers an entry held for input (1.3): a JSON value valid
	// against its input_request's requested_schema, with Approved true.
	// Empty otherwise.
	Input json.RawMessage `json:"input,omitempty"`
	// Digest, optional, is DecisionDigest of the call as the decider was
	// shown it; the worker refuses an answer whose digest is not that of
	// the call it holds (the call stays held).
	Digest string `json:"digest,omitempty"`
}

// StepPendingMsgID is the Nats-Msg-Id of a step.pending event.
func StepPendingMsgID(agentID, turnID string, step int64) string {
	return StepMsgID(agentID, turnID, step) + ".pending"
}

// StepPendingRoundMsgID is the Nats-Msg-Id of the step.pending of a
// step's round r: round 1 is the step's first (StepPendingMsgID), each
// later one follows a server that asked for input again after an answer,
// <step id>.pending.<r> (r ≥ 2), so that de-duplication keeps it.
func StepPendingRoundMsgID(agentID, turnID string, step int64, round int) string {
	id := StepPendingMsgID(agentID, turnID, step)
	if round > 1 {
		id += "." + strconv.Itoa(round)
	}
	return id
}

// ApprovalMsgID is the Nats-Msg-Id of the n-th answer for a pending step:
// the first is <step id>.approval, a correction after a dead-lettered one
// <step id>.approval.<n> (n ≥ 2).
func ApprovalMsgID(agentID, turnID string, step int64, n int) string {
	id := StepMsgID(agentID, turnID, step) + ".approval"
	if n > 1 {
		id += "." + strconv.Itoa(n)
	}
	return id
}

// Progress is the progress of a running call on an activity
// event whose State is "progress".
type Progress struct {
	Done  int64  `json:"done"`
	Total *int64 `json:"total,omitempty"`
}
