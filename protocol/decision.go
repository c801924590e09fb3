package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Approval levels of a step's context.approval (and of the worker's
// --approval flag, which also takes "none").
const (
	ApprovalDestructive = "destructive"
	ApprovalAll         = "all"
)

// MaxApprovalNames bounds the names of one context.approval list.
const MaxApprovalNames = 256

// approvalName is one entry of a names list: a tool ("name"), a tool of a
// namespace ("ns.name") or every tool of a namespace ("ns.*").
var approvalName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}(\.([a-zA-Z0-9_-]{1,64}|\*))?$`)

// ApprovalScope is a step's (or catalog request's) context.approval: a
// level ("destructive" or "all") or a list of names. It only adds to the
// worker's own approval policy, never removes from it.
type ApprovalScope struct {
	Level string
	Names []string
}

// IsZero reports whether the scope asks for nothing.
func (a ApprovalScope) IsZero() bool { return a.Level == "" && len(a.Names) == 0 }

// ValidApprovalName reports whether s is a tool name, "ns.name" or "ns.*".
func ValidApprovalName(s string) bool { return approvalName.MatchString(s) }

// errApprovalType says what context.approval may be.
var errApprovalType = errors.New(`context.approval must be "destructive", "all" or a list of tool names ("name", "namespace.name", "namespace.*")`)

// UnmarshalJSON reads "destructive", "all" or a list of names, and
// refuses anything else with a message that says what is allowed.
func (a *ApprovalScope) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*a = ApprovalScope{}
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errApprovalType
		}
		if s != ApprovalDestructive && s != ApprovalAll {
			return fmt.Errorf("%w, not %q", errApprovalType, clipText(s, 64))
		}
		*a = ApprovalScope{Level: s}
		return nil
	case len(b) > 0 && b[0] == '[':
		var names []string
		if err := json.Unmarshal(b, &names); err != nil {
			return fmt.Errorf("%w: every entry must be a string", errApprovalType)
		}
		if len(names) > MaxApprovalNames {
			return fmt.Errorf("context.approval lists %d names, more than %d", len(names), MaxApprovalNames)
		}
		for _, n := range names {
			if !ValidApprovalName(n) {
				return fmt.Errorf("%w: %q is not one", errApprovalType, clipText(n, 64))
			}
		}
		*a = ApprovalScope{Names: names}
		return nil
	}
	return errApprovalType
}

// MarshalJSON writes the level, or the names.
func (a ApprovalScope) MarshalJSON() ([]byte, error) {
	if a.Level != "" {
		return json.Marshal(a.Level)
	}
	if a.Names == nil {
		return []byte("null"), nil
	}
	return json.Marshal(a.Names)
}

// Subjects of TURN_APPROVALS besides the gateway's answers
// (turn.approval.<agent_id>.<turn_id>): a pending step's timer, which the
// server holds and fires at its expiry onto the timeout subject, and the
// fleet's note that a turn with pending steps was cancelled. The timer's
// subject is in no consumer's filter, so that the work queue keeps it
// until it fires.
const (
	PrefixApprovalTimer   = PrefixApproval + ".timer"
	PrefixApprovalTimeout = PrefixApproval + ".timeout"
	PrefixApprovalCancel  = PrefixApproval + ".cancel"
)

// ApprovalTimerSubject holds the schedule of a pending step's timeout.
func ApprovalTimerSubject(agentID, turnID string, step int64) string {
	return Subject(PrefixApprovalTimer, agentID, turnID) + "." + fmt.Sprint(step)
}

// ApprovalTimeoutSubject is where a pending step's timer fires.
func ApprovalTimeoutSubject(agentID, turnID string, step int64) string {
	return Subject(PrefixApprovalTimeout, agentID, turnID) + "." + fmt.Sprint(step)
}

// ErrBadApproval is wrapped by every error ParseApproval returns; the
// message after it is the dead-letter reason.
var ErrBadApproval = errors.New("malformed approval")

func badApproval(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadApproval, fmt.Sprintf(format, args...))
}

// approvalWire is an answer as it is decoded: pointers tell a missing
// field from a zero one.
type approvalWire struct {
	AgentID   *string        `json:"agent_id"`
	TurnID    *string        `json:"turn_id"`
	Step      *int64         `json:"step"`
	Decisions []decisionWire `json:"decisions"`
}

type decisionWire struct {
	CallID   *string         `json:"call_id"`
	Approved *bool           `json:"approved"`
	Reason   *string         `json:"reason"`
	Input    json.RawMessage `json:"input"`

	// Digest (optional) binds the decision to the call shown.
	Digest *string `json:"digest"`
}

// ParseApproval decodes and checks a gateway's answer that arrived on
// subject turn.approval.<agent_id>.<turn_id>. Every field must be there
// with its type (reason is optional), the ids must agree with the
// subject, and a call may be decided once. Whether the answer fits the
// pending step (every pending call decided, no other, an input valid
// against its requested schema) is the worker's check, against what it
// stored. An input (1.3) may only come with approved true; null counts
// as absent. Any problem is an error wrapping
// ErrBadApproval that names it.
func ParseApproval(subject string, data []byte, maxBytes int) (*Approval, error) {
	if maxBytes > 0 && len(data) > maxBytes {
		return nil, badApproval("message is %d bytes, over the %d byte limit", len(data), maxBytes)
	}
	rest, ok := strings.CutPrefix(subject, PrefixApproval+".")
	agentID, turnID, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(turnID, ".") {
		return nil, badApproval("subject %q is not %s.<agent_id>.<turn_id>", subject, PrefixApproval)
	}
	var w approvalWire
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&w); err != nil {
		return nil, badApproval("not a JSON approval object: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badApproval("data after the JSON object")
	}
	switch {
	case w.AgentID == nil || w.TurnID == nil:
		return nil, badApproval("agent_id and turn_id are required")
	case w.Step == nil:
		return nil, badApproval("step is missing")
	case *w.Step < 0:
		return nil, badApproval("step %d is negative", *w.Step)
	case !ValidID(*w.AgentID) || !ValidID(*w.TurnID):
		return nil, badApproval("agent_id and turn_id must be 1-64 characters of [A-Za-z0-9_-]")
	case *w.AgentID != agentID || *w.TurnID != turnID:
		return nil, badApproval("ids %s.%s disagree with subject %q", clipText(*w.AgentID, 64), clipText(*w.TurnID, 64), subject)
	case w.Decisions == nil:
		return nil, badApproval("decisions is missing")
	case len(w.Decisions) == 0:
		return nil, badApproval("decisions is empty")
	}
	a := &Approval{AgentID: agentID, TurnID: turnID, Step: *w.Step, Decisions: make([]Decision, len(w.Decisions))}
	seen := map[string]bool{}
	for i, d := range w.Decisions {
		switch {
		case d.CallID == nil:
			return nil, badApproval("decisions[%d]: call_id is missing", i)
		case !ValidCallID(*d.CallID):
			return nil, badApproval("decisions[%d]: call_id is not 1-256 printable characters", i)
		case seen[*d.CallID]:
			return nil, badApproval("decisions[%d]: call %q is decided twice", i, clipText(*d.CallID, 64))
		case d.Approved == nil:
			return nil, badApproval("decisions[%d]: approved (true or false) is missing", i)
		}
		seen[*d.CallID] = true
		a.Decisions[i] = Decision{CallID: *d.CallID, Approved: *d.Approved}
		if in := bytes.TrimSpace(d.Input); len(in) > 0 && !bytes.Equal(in, []byte("null")) {
			if !*d.Approved {
				return nil, badApproval("decisions[%d]: input comes with approved true; a refusal carries a reason", i)
			}
			a.Decisions[i].Input = append(json.RawMessage(nil), in...)
		}
		if d.Reason != nil {
			a.Decisions[i].Reason = clipReason(*d.Reason)
		}

		// The digest binding: a digest is DecisionDigest's form, or the
		// answer is malformed.
		if d.Digest != nil {
			if !validDigest(*d.Digest) {
				return nil, badApproval("decisions[%d]: digest is not sha256:<43 base64url characters>", i)
			}
			a.Decisions[i].Digest = *d.Digest
		}
	}
	return a, nil
}
