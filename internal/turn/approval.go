package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// DefaultApprovalTimeout is how long a pending step waits for an answer.
const DefaultApprovalTimeout = 24 * time.Hour

// Policy says which calls of a main turn wait for a person's approval
// (protocol 1.1, "Approvals"): the worker's own (flags and MCP
// configuration), to which a step's context.approval adds (With). The
// zero value holds nothing back.
type Policy struct {
	// Destructive holds the calls of destructive tools.
	Destructive bool
	// All holds every call of a tool (tool searches are never held).
	All bool
	// Names holds the tools named "name" or "namespace.name", and every
	// tool of a namespace named "namespace.*".
	Names []string
	// Timeout is how long a pending step waits for an answer
	// (DefaultApprovalTimeout).
	Timeout time.Duration
}

// ParsePolicy reads the --approval flag: "none" (or ""), "destructive",
// "all", or a comma-separated list of names, which may also hold
// "destructive".
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for _, f := range strings.Split(s, ",") {
		switch f = strings.TrimSpace(f); f {
		case "", "none":
		case protocol.ApprovalDestructive:
			p.Destructive = true
		case protocol.ApprovalAll:
			p.All = true
		default:
			if !protocol.ValidApprovalName(f) {
				return Policy{}, fmt.Errorf("%q is neither none, destructive, all, nor a tool name (name, namespace.name, namespace.*)", f)
			}
			p.Names = append(p.Names, f)
		}
	}
	return p, nil
}

// With is the policy with a step's context.approval added.
func (p Policy) With(scope protocol.ApprovalScope) Policy {
	switch scope.Level {
	case protocol.ApprovalDestructive:
		p.Destructive = true
	case protocol.ApprovalAll:
		p.All = true
	}
	// A level in the list means what it means in the flag's list: a
	// gateway that writes ["destructive", "ns.*"] holds both, rather than
	// a tool named "destructive" and, silently, no destructive call.
	names := slices.Clip(p.Names)
	for _, n := range scope.Names {
		switch n {
		case protocol.ApprovalDestructive:
			p.Destructive = true
		case protocol.ApprovalAll:
			p.All = true
		default:
			names = append(names, n)
		}
	}
	p.Names = names
	return p
}

// Reason says why a call of t waits for approval under p ("destructive",
// "named" or "all"), or "" when it does not.
func (p Policy) Reason(t *tool.Tool) string {
	sp := t.Spec()
	if sp.Destructive && (p.Destructive || p.All) {
		return protocol.ApprovalDestructive
	}
	for _, n := range p.Names {
		ns, name, scoped := strings.Cut(n, ".")
		if scoped && ns == sp.Namespace && (name == "*" || name == sp.Name) || !scoped && sp.Namespace == "" && n == sp.Name {
			return "named"
		}
	}
	if p.All {
		return protocol.ApprovalAll
	}
	return ""
}

// Held lists the tools of set whose calls wait for approval under p, in
// the set's order, as "name" or "namespace.name": the catalog reply's
// approval field.
func (p Policy) Held(set *Set) []string {
	var out []string
	for _, t := range set.Tools() {
		if p.Reason(t) != "" {
			out = append(out, ToolKey(t.Spec().Namespace, t.Name()))
		}
	}
	return out
}

func (p Policy) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return DefaultApprovalTimeout
}

// PendingStep is a main-turn step held for approval, as TURN_STATE keeps
// it: everything needed to finish it later, on any worker. Nothing of it
// has run.
type PendingStep struct {
	AgentID string           `json:"agent_id"`
	TurnID  string           `json:"turn_id"`
	Step    int64            `json:"step"`
	Context protocol.Context `json:"context"`
	// Calls are the step's calls in their order, each as validation left
	// it.
	Calls     []HeldCall `json:"calls"`
	ExpiresAt time.Time  `json:"expires_at"`
	// State is "pending" until an answer, the timeout or a cancel decides
	// the step ("decided"), and "done" once its step.done is out.
	State string `json:"state"`
	// Resolution is what decided it (still "verdict" in the stored record,
	// which workers of every version read).
	Resolution *Resolution `json:"verdict,omitempty"`
}

// States of a PendingStep.
const (
	StatePending = "pending"
	StateDecided = "decided"
	StateDone    = "done"
)

// HeldCall is one call of a pending step.
type HeldCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Execution string `json:"execution,omitempty"`
	// Arguments is the model's argument string, kept for the call's
	// digest (its identity in the journal), never run.
	Arguments string          `json:"arguments,omitempty"`
	Search    json.RawMessage `json:"search,omitempty"`
	// Valid is the validated (and repaired) arguments: what runs.
	Valid   json.RawMessage `json:"valid,omitempty"`
	Repairs []string        `json:"repairs,omitempty"`
	// Outcome answers a call that validation refused (unknown tool,
	// invalid arguments, …); it is reported when the step completes.
	Outcome *Outcome `json:"outcome,omitempty"`
	// Approval is why the call waits ("destructive", "named", "all");
	// empty for a call that needs no approval, which runs with the
	// approved ones.
	Approval string `json:"approval,omitempty"`
	Activity string `json:"activity,omitempty"`
	// ReadOnly and Destructive are the tool's flags, for the person who
	// decides (a console shows them beside the arguments).
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
}

// Resolution is what decided a pending step (not a task turn's verdict,
// protocol.Verdict).
type Resolution struct {
	// By is "answer", "timeout" or "cancel".
	By string `json:"by"`
	// Seq is the TURN_APPROVALS sequence of the message that decided: its
	// redelivery finishes the step, any other message is ignored.
	Seq       uint64              `json:"seq"`
	Decisions []protocol.Decision `json:"decisions,omitempty"`
	Reason    string              `json:"reason,omitempty"`
}

// Ways a step is decided.
const (
	ByAnswer  = "answer"
	ByTimeout = "timeout"
	ByCancel  = "cancel"
)

// ErrApproval is wrapped by the errors of Decide: an answer that does not
// fit the pending step. The message is the dead-letter reason.
var ErrApproval = errors.New("the answer does not fit the pending step")

// Decide checks an answer against the step: every pending call decided,
// no other call named.
func (p *PendingStep) Decide(a *protocol.Approval) error {
	decided := map[string]bool{}
	for _, d := range a.Decisions {
		decided[d.CallID] = true
	}
	var missing []string
	for _, c := range p.Calls {
		if c.Approval == "" {
			continue
		}
		if !decided[c.CallID] {
			missing = append(missing, fmt.Sprintf("%q", textclip.Text(c.CallID, 64)))
		}
		delete(decided, c.CallID)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: no decision for the pending call(s) %s of step %d; every pending call needs one", ErrApproval, strings.Join(missing, ", "), p.Step)
	}
	for _, d := range a.Decisions {
		if decided[d.CallID] {
			return fmt.Errorf("%w: call %q is not pending approval in step %d", ErrApproval, textclip.Text(d.CallID, 64), p.Step)
		}
	}
	return p.checkDigests(a)
}

// checkDigests refuses an answer whose decision carries a digest that is
// not the held call's (protocol.DecisionDigest): the person was shown
// another call than the one that would run. The answer is dead-lettered
// with this reason and the step stays held.
func (p *PendingStep) checkDigests(a *protocol.Approval) error {
	for _, d := range a.Decisions {
		if d.Digest == "" {
			continue
		}
		for _, c := range p.Calls {
			if c.CallID != d.CallID {
				continue
			}
			if want := protocol.DecisionDigest(c.CallID, c.Namespace, c.Name, c.Valid); d.Digest != want {
				return fmt.Errorf("%w: the decision for call %q of step %d carries digest %s, but the held call's is %s: it was decided on other arguments than those that would run; nothing ran, the step stays held, decide it again from what it holds",
					ErrApproval, textclip.Text(d.CallID, 64), p.Step, d.Digest, want)
			}
		}
	}
	return nil
}

// Event is the step's step.pending event.
func (p *PendingStep) Event() *protocol.StepPending {
	ev := &protocol.StepPending{Type: protocol.EventStepPending, AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step, ExpiresAt: p.ExpiresAt, Approvals: []protocol.PendingCall{}}
	for _, c := range p.Calls {
		if c.Approval != "" {
			ev.Approvals = append(ev.Approvals, protocol.PendingCall{CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Arguments: c.Valid, Reason: c.Approval, Activity: c.Activity, ReadOnly: c.ReadOnly, Destructive: c.Destructive})
		}
	}
	return ev
}

// Approvals keeps pending steps (the worker implements it on TURN_STATE
// and TURN_APPROVALS).
type Approvals interface {
	// Hold stores p with a create-only write. When the step has a record
	// already (a redelivered step), it stores nothing and returns that.
	Hold(ctx context.Context, p *PendingStep) (*PendingStep, error)
	// Announce schedules p's timeout and publishes its step.pending. Both
	// are de-duplicated: a redelivery may announce again.
	Announce(ctx context.Context, p *PendingStep) error
}

// hold gates a resolved step: when a call whose arguments are valid
// needs approval under policy, it returns the step's calls as validation
// left them (and ends their spans); otherwise nil, and the step runs.
func (d *Dispatcher) hold(ps []*pending, policy *Policy) []HeldCall {
	need := false
	for _, p := range ps {
		if p.inv != nil && policy.Reason(p.inv.Tool) != "" {
			need = true
			break
		}
	}
	if !need {
		return nil
	}
	held := make([]HeldCall, len(ps))
	for i, p := range ps {
		c := *p.call
		h := HeldCall{Type: c.Type, CallID: c.CallID, Namespace: c.Namespace, Name: c.Name, Execution: c.Execution, Arguments: c.Arguments, Search: c.Search}
		switch {
		case p.outcome != nil:
			h.Outcome = p.outcome
		case p.inv != nil:
			args, err := d.validated(p)
			if err != nil {
				// A validated value always encodes; should it not, the call
				// is answered, not held with arguments nobody saw.
				h.Outcome = errorOutcome(c, tool.Errorf(tool.Internal, "The validated arguments could not be kept for approval: %v", err))
				break
			}
			h.Valid, h.Repairs, h.Activity, h.Approval = args, p.inv.Repairs, p.inv.Activity, policy.Reason(p.inv.Tool)
			sp := p.inv.Tool.Spec()
			h.ReadOnly, h.Destructive = sp.ReadOnly, sp.Destructive
		}
		held[i] = h
		if p.span != nil {
			p.span.End()
		}
	}
	return held
}

// validated is the value a resolved call's arguments validated to, as
// JSON text: what the tool would run with. It is derived again, off the
// hot path, by the same deterministic parse Prepare made (with the
// conservative repairs of a destructive tool), so that a running call
// keeps nothing it does not need.
func (d *Dispatcher) validated(p *pending) (json.RawMessage, error) {
	valid, _, err := tools.Validate(p.inv.Tool, p.call.Arguments, d.Repair.Limit)
	return valid, err
}

// heldOutcome is the outcome a decided pending call gets without running:
// refused or timed out. Approved calls get none. (A cancelled step's
// calls are all answered aborted by Resolve.)
func heldOutcome(c protocol.CallItem, p *PendingStep) *Outcome {
	v := p.Resolution
	switch {
	case v.By == ByTimeout:
		return errorOutcome(c, tool.Errorf(tool.Rejected, "Not run: %s: nobody approved this call by %s. Ask whether it is still wanted before calling it again.",
			protocol.ApprovalTimedOut, p.ExpiresAt.UTC().Format(time.RFC3339)))
	}
	for _, d := range v.Decisions {
		if d.CallID != c.CallID {
			continue
		}
		if d.Approved {
			return nil
		}
		text := "Not run: the person asked to approve this call refused it."
		if d.Reason != "" {
			text = fmt.Sprintf("Not run: the person asked to approve this call refused it: %s", d.Reason)
		}
		return errorOutcome(c, tool.Errorf(tool.Rejected, "%s", text))
	}
	return errorOutcome(c, tool.Errorf(tool.Rejected, "Not run: no decision was recorded for this call."))
}

// holdStep stores and announces a step whose calls wait for approval.
func (r *Runner) holdStep(ctx context.Context, st *protocol.Step, calls []HeldCall) error {
	if r.Approvals == nil {
		return errors.New("a call needs approval, but this worker keeps no pending steps")
	}
	p := &PendingStep{AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step, Context: st.Context, Calls: calls,
		ExpiresAt: time.Now().Add(r.Approval.timeout()).UTC().Truncate(time.Second), State: StatePending}
	had, err := r.Approvals.Hold(ctx, p)
	if err != nil {
		return fmt.Errorf("storing the pending step: %w", err)
	}
	if had != nil {
		if had.State != StatePending {
			// Decided already: whoever decided it finishes it.
			return nil
		}
		p = had
	}
	return r.Approvals.Announce(ctx, p)
}

// Resolve finishes a decided pending step: the approved calls and those
// that needed no approval run with exactly their stored arguments, the
// others are answered (rejected, or aborted when the turn was
// cancelled), each call.output is published, then step.done. The
// journal makes it effectively-once: a redelivered decision runs nothing
// twice. A nil error means every event is stored.
func (r *Runner) Resolve(ctx context.Context, p *PendingStep) error {
	if p.Resolution == nil {
		return errors.New("the pending step is not decided")
	}
	cancelled, reason, err := r.State.Cancelled(ctx, p.AgentID, p.TurnID)
	if err != nil {
		return fmt.Errorf("reading the turn's cancel mark: %w", err)
	}
	if p.Resolution.By == ByCancel {
		// The note decides even where the mark is missing (its write
		// failed where the cancel was heard): the step is cancelled.
		cancelled, reason = true, p.Resolution.Reason
	}
	st := &protocol.Step{AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step, Context: p.Context, Items: len(p.Calls)}
	stored := make(map[string]*HeldCall, len(p.Calls))
	for i := range p.Calls {
		h := &p.Calls[i]
		c := protocol.CallItem{Type: h.Type, CallID: h.CallID, Namespace: h.Namespace, Name: h.Name, Execution: h.Execution, Arguments: h.Arguments, Search: h.Search}
		st.Calls = append(st.Calls, c)
		switch {
		case h.Outcome != nil:
			stored[c.CallID] = h
		case h.Valid == nil: // a tool search: it runs, or is aborted, as in any step
		case cancelled:
			// Every call validation did not refuse, held or not.
			stored[c.CallID] = &HeldCall{Outcome: notRun(c, cancelCause(reason))}
		case h.Approval != "":
			if o := heldOutcome(c, p); o != nil {
				stored[c.CallID] = &HeldCall{Outcome: o}
				continue
			}
			stored[c.CallID] = h
		default:
			stored[c.CallID] = h
		}
	}
	ctx, span := r.Process(ctx, st)
	defer span.End()
	res, err := r.dispatch(ctx, st, nil, nil, stored)
	if err != nil {
		return err
	}
	res.EndTurn = res.EndTurn || cancelled
	return r.Emitter.StepDone(ctx, res.stepDone(st))
}
