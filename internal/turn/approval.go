package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"

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
	// Round numbers the holds of a step held for input: 0 or 1 for the
	// first, one more each time a resumed call's server asks again.
	Round int `json:"round,omitempty"`
	// StepDigest says that the worker which held the step accepts, for
	// its calls, protocol.StepDecisionDigest (bound to the agent, turn,
	// step and round) beside protocol.DecisionDigest: a console sends
	// the former only to a record that says so.
	StepDigest bool `json:"step_digest,omitempty"`
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
	// Input is the hold of a call waiting, mid-run, for a person's input
	// (Approval is then "input"); nil otherwise.
	Input *InputHold `json:"input,omitempty"`
	// Ended is set on a call of a step held for input that ran and ended
	// before the hold: its call.output is out, and Outcome is what
	// step.done reports for it.
	Ended bool `json:"ended,omitempty"`
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
	if err := p.checkDigests(a); err != nil {
		return err
	}
	for _, d := range a.Decisions {
		for i := range p.Calls {
			c := &p.Calls[i]
			switch {
			case c.CallID != d.CallID:
			case c.Input == nil && d.Input != nil:
				return fmt.Errorf("%w: call %q waits for approval, not input; its decision carries none", ErrApproval, textclip.Text(d.CallID, 64))
			case c.Input != nil:
				if err := checkInput(c, d); err != nil {
					return fmt.Errorf("%w: %v", ErrApproval, err)
				}
			}
		}
	}
	return nil
}

// checkDigests refuses an answer whose decision carries a digest that is
// not the held call's: the person was shown another call than the one
// that would run, or this call held elsewhere (another agent's, turn's
// or step's, or an earlier round of its question). The held call's is
// protocol.StepDecisionDigest of this hold, or protocol.DecisionDigest,
// which gateways of before the step-bound digest send. The answer is
// dead-lettered with this reason and the step stays held.
func (p *PendingStep) checkDigests(a *protocol.Approval) error {
	for _, d := range a.Decisions {
		if d.Digest == "" {
			continue
		}
		for _, c := range p.Calls {
			if c.CallID != d.CallID {
				continue
			}
			bound := protocol.StepDecisionDigest(p.AgentID, p.TurnID, p.Step, p.Round, c.CallID, c.Namespace, c.Name, c.Valid)
			if want := protocol.DecisionDigest(c.CallID, c.Namespace, c.Name, c.Valid); d.Digest != want && d.Digest != bound {
				return fmt.Errorf("%w: the decision for call %q of step %d (round %d) carries digest %s, but the held call's is %s (%s bound to agent, turn, step and round): it was decided on other arguments than those that would run, or on another hold; nothing ran, the step stays held, decide it again from what it holds",
					ErrApproval, textclip.Text(d.CallID, 64), p.Step, max(p.Round, 1), d.Digest, want, bound)
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
			pc := protocol.PendingCall{CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Arguments: c.Valid, Reason: c.Approval, Activity: c.Activity, ReadOnly: c.ReadOnly, Destructive: c.Destructive}
			if c.Input != nil {
				in := c.Input.Request
				pc.InputRequest = &in
			}
			ev.Approvals = append(ev.Approvals, pc)
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
		if p.valid() && policy.Reason(p.invocation.Tool) != "" {
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
		case p.valid():
			args, err := d.validated(p)
			if err != nil {
				// A validated value always encodes; should it not, the call
				// is answered, not held with arguments nobody saw.
				h.Outcome = errorOutcome(c, tool.Errorf(tool.Internal, "The validated arguments could not be kept for approval: %v", err))
				break
			}
			h.Valid, h.Repairs, h.Activity, h.Approval = args, p.invocation.Repairs, p.invocation.Activity, policy.Reason(p.invocation.Tool)
			sp := p.invocation.Tool.Spec()
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
	valid, _, err := tools.Validate(p.invocation.Tool, p.call.Arguments, d.Repair.Limit)
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
		ExpiresAt: time.Now().Add(r.Approval.timeout()).UTC().Truncate(time.Second), State: StatePending, StepDigest: true}
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
	if p.live() {
		// The worker running the call reads the decision from the record
		// and finishes the step itself (AskLive).
		return nil
	}
	if p.inputHeld() {
		return r.resolveInput(ctx, p)
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

// Input requests (protocol 1.3, "Input requests"): a tool whose server
// asks a person for input mid-call returns HoldForInput. Its outcome
// (kind KindInput, never on the wire) is journaled like any other, its
// call.output waits, the step's other calls run and end, and the step is
// held like an approval, with the call's entry reason "input". The
// decision resumes the call on any worker: the tool finds it with
// ResumeOf.

// KindInput is the kind of a held call's outcome: it is kept in the
// journal and the pending step's record, and never published.
const KindInput tool.Kind = "input_required"

// MaxInputBytes bounds one decision's input: it is kept in the pending
// step's record beside the step's calls.
const MaxInputBytes = 64 << 10

// InputHold is what a held call keeps in TURN_STATE: the request a person
// answers, the arguments it resumes with, and the tool's own state.
type InputHold struct {
	Request protocol.InputRequest `json:"request"`
	// Arguments are the call's validated arguments, which the resumed call
	// runs with.
	Arguments json.RawMessage `json:"arguments"`
	// State is the tool's, opaque here (an MCP server's requestState and
	// the id of its request).
	State json.RawMessage `json:"state,omitempty"`
	// Round counts the holds of the call: 1 for the first, one more each
	// time its server asks again.
	Round int `json:"round"`
	// Live marks a request answered inside the running call (an MCP
	// elicitation of 2025-11-25, AskLive): the worker running the call
	// waits for the decision and finishes the step itself.
	Live bool `json:"live,omitempty"`
}

// ErrHeldAgain is returned by Resolve when a resumed call's server asked
// for input again: the step is held once more (a new step.pending), and
// the message that decided it is done with.
var ErrHeldAgain = errors.New("the step is held for input again")

type inputAllowedKey struct{}

// allowInput marks ctx as a step's whose calls may be held for input: a
// main turn's, on a worker that keeps pending steps (r's).
func allowInput(ctx context.Context, r *Runner) context.Context {
	return context.WithValue(ctx, inputAllowedKey{}, r)
}

// InputAllowed reports whether a call may be held for input.
func InputAllowed(ctx context.Context) bool {
	r, _ := ctx.Value(inputAllowedKey{}).(*Runner)
	return r != nil
}

// Resume is what a resumed call gets: its hold and the person's answer
// (Approved with Input, or a refusal with its Reason).
type Resume struct {
	Hold     *InputHold
	Decision protocol.Decision
}

type resumeKey struct{}

// ResumeOf is the resume of the call callID in ctx, or nil when the call
// is not being resumed.
func ResumeOf(ctx context.Context, callID string) *Resume {
	m, _ := ctx.Value(resumeKey{}).(map[string]*Resume)
	return m[callID]
}

// HoldForInput is what a tool returns when its server asks a person for
// input: the runtime holds the call with h (whose Round it sets). Call it
// only where InputAllowed.
func HoldForInput(ctx context.Context, h *InputHold) (tool.Result, error) {
	h.Round = 1
	call, _ := tool.CallFrom(ctx)
	if r := ResumeOf(ctx, call.CallID); r != nil && r.Hold != nil {
		h.Round = r.Hold.Round + 1
	}
	return tool.Result{Details: h}, tool.Errorf(KindInput, "The call waits for a person's input: %s", textclip.Text(h.Request.Message, 256))
}

// inputHold is the hold of an outcome held for input (also one replayed
// from the journal, whose details are decoded JSON), or nil.
func inputHold(o *Outcome) *InputHold {
	if o == nil || o.Err == nil || o.Err.Kind != KindInput {
		return nil
	}
	if h, ok := o.Details.(*InputHold); ok {
		return h
	}
	b, err := json.Marshal(o.Details)
	if err != nil {
		return nil
	}
	var h InputHold
	if json.Unmarshal(b, &h) != nil || h.Round < 1 || len(h.Arguments) == 0 {
		return nil
	}
	return &h
}

// HeldForInput reports whether o is the outcome of a call held for input:
// its call.output waits for the answer.
func HeldForInput(o *Outcome) bool { return o != nil && o.Err != nil && o.Err.Kind == KindInput }

// Resumes reports whether a journal claim of ref's call, which finds
// stored the outcome o, is the resumption ctx makes of that very hold: the
// claim then replaces the held outcome instead of replaying it. A hold of
// a later round (the call asked again, and this is a redelivery) is not.
func Resumes(ctx context.Context, ref JournalRef, o *Outcome) bool {
	r := ResumeOf(ctx, ref.CallID)
	if r == nil || r.Hold == nil {
		return false
	}
	h := inputHold(o)
	return h != nil && h.Round == r.Hold.Round
}

// holdsInput reports whether a step's result has a call held for input.
func holdsInput(res *StepResult) bool {
	for _, o := range res.Outcomes {
		if HeldForInput(o) {
			return true
		}
	}
	return false
}

// inputCalls is the pending step's calls after a run whose outcomes
// (in call order) hold some for input: those carry their hold, the others
// their outcome, already published (Ended). A held outcome whose hold
// cannot be read is answered as a tool error.
func inputCalls(calls []protocol.CallItem, outcomes []*Outcome) []HeldCall {
	held := make([]HeldCall, len(calls))
	for i, c := range calls {
		o := outcomes[i]
		h := HeldCall{Type: c.Type, CallID: c.CallID, Namespace: c.Namespace, Name: c.Name, Execution: c.Execution, Arguments: c.Arguments, Search: c.Search}
		switch in := inputHold(o); {
		case in != nil:
			h.Input, h.Valid, h.Approval, h.Activity = in, in.Arguments, protocol.PendingInput, o.Activity
			h.Repairs = o.Repairs()
		case HeldForInput(o):
			h.Outcome = errorOutcome(c, tool.Errorf(tool.ToolError, "The tool asked for a person's input, but what it asked could not be kept, so the call was not finished. Check its effect before calling it again."))
		default:
			h.Outcome, h.Ended = o, true
		}
		held[i] = h
	}
	return held
}

// holdInput stores and announces a step a call of which waits for input.
func (r *Runner) holdInput(ctx context.Context, st *protocol.Step, res *StepResult) error {
	return r.holdStep(ctx, st, inputCalls(st.Calls, res.Outcomes))
}

// Reholder is implemented by Approvals that can hold a decided step again
// for its next round (the worker's TURN_STATE store).
type Reholder interface {
	// Rehold writes next over the record of decided, the step as it was
	// decided, and announces it (a new step.pending, a new timer). A
	// record already at next's round is announced again.
	Rehold(ctx context.Context, decided, next *PendingStep) error
}

// checkInput checks a decision for a call held for input: an approval
// carries an input (absent counts as {}) valid against the requested
// schema, bounded; a refusal carries none.
func checkInput(c *HeldCall, d protocol.Decision) error {
	if !d.Approved {
		return nil
	}
	in := d.Input
	if len(in) == 0 {
		in = json.RawMessage(`{}`)
	}
	if len(in) > MaxInputBytes {
		return fmt.Errorf("the input for call %q is %d bytes, over the %d a decision may carry", textclip.Text(c.CallID, 64), len(in), MaxInputBytes)
	}
	s, err := compileRequested(c.Input.Request.RequestedSchema)
	if err != nil {
		return fmt.Errorf("call %q: its requested schema cannot be checked (%v); refuse it instead", textclip.Text(c.CallID, 64), err)
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("the input for call %q is not JSON: %v", textclip.Text(c.CallID, 64), err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("the input for call %q is not valid against its requested_schema: %s", textclip.Text(c.CallID, 64), textclip.Text(err.Error(), 512))
	}
	return nil
}

// compileRequested compiles a requested schema, with no remote
// references.
func compileRequested(raw json.RawMessage) (*jsonschema.Schema, error) {
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("remote reference %q is not allowed", s)
	}
	const url = "mem://requested.json"
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// inputHeld reports whether the pending step holds calls for input (and
// none for approval: the two never mix in one step, since a step held
// for approval runs nothing until it is decided).
func (p *PendingStep) inputHeld() bool {
	for _, c := range p.Calls {
		if c.Input != nil {
			return true
		}
	}
	return false
}

// resolveInput finishes a decided step held for input: the held calls
// resume with their answers (or are answered rejected at the timeout,
// aborted at a cancel), their call.output events go out, then the step's
// one step.done with every call's outcome in order. A call whose server
// asks again holds the step again (ErrHeldAgain).
func (r *Runner) resolveInput(ctx context.Context, p *PendingStep) error {
	cancelled, reason, err := r.State.Cancelled(ctx, p.AgentID, p.TurnID)
	if err != nil {
		return fmt.Errorf("reading the turn's cancel mark: %w", err)
	}
	if p.Resolution.By == ByCancel {
		cancelled, reason = true, p.Resolution.Reason
	}
	full := &protocol.Step{AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step, Context: p.Context, Items: len(p.Calls)}
	sub := &protocol.Step{AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step, Context: p.Context}
	outcomes := make([]*Outcome, len(p.Calls))
	at := map[string]int{}
	stored := map[string]*HeldCall{}
	resumes := map[string]*Resume{}
	for i := range p.Calls {
		h := &p.Calls[i]
		c := protocol.CallItem{Type: h.Type, CallID: h.CallID, Namespace: h.Namespace, Name: h.Name, Execution: h.Execution, Arguments: h.Arguments, Search: h.Search}
		full.Calls = append(full.Calls, c)
		if h.Input == nil {
			outcomes[i] = h.Outcome
			continue
		}
		sub.Calls, at[c.CallID] = append(sub.Calls, c), i
		switch {
		case cancelled:
			stored[c.CallID] = &HeldCall{Outcome: notRun(c, cancelCause(reason))}
		case p.Resolution.By == ByTimeout:
			stored[c.CallID] = &HeldCall{Outcome: errorOutcome(c, tool.Errorf(tool.Rejected,
				"Not finished: %s: the tool asked a person for input (%q) and nobody answered by %s. Ask whether it is still wanted before calling it again.",
				protocol.ApprovalTimedOut, textclip.Text(h.Input.Request.Message, 256), p.ExpiresAt.UTC().Format(time.RFC3339)))}
		default:
			d := protocol.Decision{CallID: c.CallID, Approved: false, Reason: "no decision was recorded for this call"}
			for _, x := range p.Resolution.Decisions {
				if x.CallID == c.CallID {
					d = x
				}
			}
			resumes[c.CallID] = &Resume{Hold: h.Input, Decision: d}
			stored[c.CallID] = &HeldCall{Valid: h.Valid, Repairs: h.Repairs}
		}
	}
	sub.Items = len(sub.Calls)
	// Every resumed call is claimed before it runs (none is recorded
	// after), so that the claim replaces its held outcome.
	ctx = allowInput(context.WithValue(Redelivered(ctx), resumeKey{}, resumes), r)
	ctx, span := r.Process(ctx, full)
	defer span.End()
	res, err := r.dispatch(ctx, sub, nil, nil, stored)
	if err != nil {
		return err
	}
	again := false
	for j, c := range sub.Calls {
		outcomes[at[c.CallID]] = res.Outcomes[j]
		again = again || HeldForInput(res.Outcomes[j])
	}
	if again {
		return r.holdAgain(ctx, p, full, outcomes)
	}
	done := &StepResult{Outcomes: outcomes, EndTurn: cancelled}
	for _, o := range outcomes {
		done.EndTurn = done.EndTurn || o.EndTurn
		done.CompleteActorEvent = done.CompleteActorEvent || o.Complete
	}
	return r.Emitter.StepDone(ctx, done.stepDone(full))
}

// holdAgain holds a step for its next round: a resumed call's server
// asked again.
func (r *Runner) holdAgain(ctx context.Context, p *PendingStep, full *protocol.Step, outcomes []*Outcome) error {
	rh, ok := r.Approvals.(Reholder)
	if !ok {
		return errors.New("a resumed call asks for input again, but this worker cannot hold its step again")
	}
	next := &PendingStep{AgentID: p.AgentID, TurnID: p.TurnID, Step: p.Step, Context: p.Context, Calls: inputCalls(full.Calls, outcomes),
		ExpiresAt: time.Now().Add(r.Approval.timeout()).UTC().Truncate(time.Second), State: StatePending, Round: max(p.Round, 1) + 1, StepDigest: true}
	if err := rh.Rehold(ctx, p, next); err != nil {
		return fmt.Errorf("holding the step again for input: %w", err)
	}
	return ErrHeldAgain
}

// live reports whether the step's request is answered inside its running
// call (AskLive).
func (p *PendingStep) live() bool {
	for _, c := range p.Calls {
		if c.Input != nil && c.Input.Live {
			return true
		}
	}
	return false
}

// Awaiter is implemented by Approvals that can wait for a pending step's
// decision (the worker's TURN_STATE store, with a watch of its record).
type Awaiter interface {
	// AwaitDecided returns the step's record once its round round is
	// decided, or ctx's error.
	AwaitDecided(ctx context.Context, agentID, turnID string, step int64, round int) (*PendingStep, error)
}

// ErrNoAnswer is returned by AskLive when the request ended without a
// person's answer: it timed out, the turn was cancelled, or a step's
// request cannot be held here.
var ErrNoAnswer = errors.New("no answer to the request for input")

// AskLive asks a person for input inside a running call (an MCP server's
// elicitation of 2025-11-25, a request the server waits on): the step is
// held with the call's entry (reason "input"), a step.pending goes out,
// and AskLive waits, in this worker, for the decision any worker records.
// It is bounded by the call's own deadline (the step's expiry is no
// later). If this worker dies meanwhile the request is lost with the
// server's connection: the step's redelivery answers the call
// interrupted. args are the call's validated arguments, shown to the
// person.
func AskLive(ctx context.Context, req protocol.InputRequest, args json.RawMessage) (protocol.Decision, error) {
	r, _ := ctx.Value(inputAllowedKey{}).(*Runner)
	call, ok := tool.CallFrom(ctx)
	aw, ok2 := r.approvals().(Awaiter)
	if r == nil || !ok || !ok2 {
		return protocol.Decision{}, fmt.Errorf("%w: this call cannot be held for input", ErrNoAnswer)
	}
	expires := time.Now().Add(r.Approval.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(expires) {
		expires = d
	}
	h := HeldCall{Type: protocol.ItemFunctionCall, CallID: call.CallID, Valid: args, Approval: protocol.PendingInput,
		Input: &InputHold{Request: req, Arguments: args, Round: 1, Live: true}}
	if name, ok := ctx.Value(liveToolKey{}).([2]string); ok {
		h.Namespace, h.Name = name[0], name[1]
	}
	p := &PendingStep{AgentID: call.AgentID, TurnID: call.TurnID, Step: call.Step, Calls: []HeldCall{h},
		ExpiresAt: expires.UTC().Truncate(time.Second), State: StatePending, Round: 1, StepDigest: true}
	had, err := r.Approvals.Hold(ctx, p)
	if err != nil {
		return protocol.Decision{}, fmt.Errorf("storing the request for input: %w", err)
	}
	if had != nil {
		// The step held a request before (this call's last elicitation):
		// the next round.
		rh, ok := r.Approvals.(Reholder)
		if !ok || had.State == StatePending || !had.live() {
			return protocol.Decision{}, fmt.Errorf("%w: another request of step %d is waiting for a person", ErrNoAnswer, call.Step)
		}
		p.Round = max(had.Round, 1) + 1
		p.Calls[0].Input.Round = p.Round
		if err := rh.Rehold(ctx, had, p); err != nil {
			return protocol.Decision{}, err
		}
	} else if err := r.Approvals.Announce(ctx, p); err != nil {
		return protocol.Decision{}, err
	}
	got, err := aw.AwaitDecided(ctx, p.AgentID, p.TurnID, p.Step, p.Round)
	if err != nil {
		return protocol.Decision{}, fmt.Errorf("%w: %v", ErrNoAnswer, context.Cause(ctx))
	}
	if got.Resolution.By != ByAnswer {
		return protocol.Decision{}, fmt.Errorf("%w: %s", ErrNoAnswer, got.Resolution.By)
	}
	for _, d := range got.Resolution.Decisions {
		if d.CallID == call.CallID {
			return d, nil
		}
	}
	return protocol.Decision{}, fmt.Errorf("%w: no decision for the call", ErrNoAnswer)
}

type liveToolKey struct{}

// WithTool names the running call's tool for AskLive's step.pending.
func WithTool(ctx context.Context, namespace, name string) context.Context {
	return context.WithValue(ctx, liveToolKey{}, [2]string{namespace, name})
}

func (r *Runner) approvals() Approvals {
	if r == nil {
		return nil
	}
	return r.Approvals
}
