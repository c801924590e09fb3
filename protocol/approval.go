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
	// Digest, optional, is DecisionDigest of the call as the decider was
	// shown it; the worker refuses an answer whose digest is not that of
	// the call it holds (the call stays held).
	Digest string `json:"digest,omitempty"`
}

// StepPendingMsgID is the Nats-Msg-Id of a step.pending event.
func StepPendingMsgID(agentID, turnID string, step int64) string {
	return StepMsgID(agentID, turnID, step) + ".pending"
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
