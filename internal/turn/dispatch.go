package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/fit"
	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/telemetry/spans"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
)

// Defaults of a zero Dispatcher.
const (
	DefaultMaxParallel = 8
	DefaultTimeout     = 2 * time.Minute
	DefaultSearchLimit = 5
)

// ErrCancelled is the cause of a turn's context when the gateway cancelled
// the turn.
var ErrCancelled = errors.New("the turn was cancelled")

// errCallTimeout is the cause of a call's context when its time ran out.
var errCallTimeout = errors.New("call timed out")

// ErrClaimed is returned by Journal.Claim when an earlier attempt claimed
// the call and died before storing its outcome.
var ErrClaimed = errors.New("call was claimed by an earlier attempt that did not finish")

// ErrReused is returned by Journal.Claim when the call id was claimed
// for a different call (another tool or other arguments: CallRef.Digest
// differs): a gateway re-sent the step with other calls under used ids.
var ErrReused = errors.New("call id was used for a different call")

// Journal makes calls effectively-once across redelivery of a step. The
// worker implements it on the TURN_STATE bucket.
type Journal interface {
	// Claim records that call is about to run, with a create-only write.
	// It returns the stored outcome when an earlier attempt finished the
	// call, ErrClaimed when an earlier attempt claimed it but never
	// stored an outcome, and ErrReused when the claim is of a call with
	// another digest.
	Claim(ctx context.Context, ref CallRef) (*Outcome, error)
	// Store records the outcome of a claimed call.
	Store(ctx context.Context, ref CallRef, o *Outcome) error
}

// ReuseChecker is implemented by a Journal that can tell which of the
// calls of one step that failed before running (unknown tool, invalid
// arguments: never claimed) use a call id the journal holds for another
// call, so that a re-sent step is not answered under the first version's
// message ids (docs/protocol.md, "Reused call ids").
type ReuseChecker interface {
	ReusedIDs(ctx context.Context, refs []CallRef) (map[string]bool, error)
}

// Observer is told of calls as they start and end. Its methods are called
// from several goroutines at once.
type Observer interface {
	CallStarted(ref CallRef, c protocol.Call, label string)
	CallEnded(ref CallRef, o *Outcome)
}

// Meter is told of calls for metrics (the worker implements it with
// OpenTelemetry). CallEnded is not told of outcomes replayed from the
// journal; its methods are called from several goroutines at once.
type Meter interface {
	CallStarted(tool string)
	CallEnded(o *Outcome)
}

// CallRef identifies a call across the fleet.
type CallRef struct {
	AgentID string
	TurnID  string
	Step    int64
	CallID  string
	// Digest is protocol.CallDigest of the call: what it asks for, stored
	// with its claim.
	Digest string
}

// Input is one step to dispatch.
type Input struct {
	AgentID string
	TurnID  string
	Step    int64
	Calls   []protocol.Call
	// Loaded holds the keys (ToolKey) of the deferred tools this turn has
	// loaded through tool search.
	Loaded map[string]bool
	// Approval, when set, holds the step (Result.Held) if any call whose
	// arguments are valid needs approval under it.
	Approval *Policy
	// Stored are the calls of a decided pending step, by call id: each
	// runs with its stored arguments, or is answered with its outcome.
	Stored map[string]*HeldCall
}

// Outcome is how one call ended. It is stored in the journal and so
// marshals to JSON.
type Outcome struct {
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Err       *tools.Error    `json:"error,omitempty"`
	Item      json.RawMessage `json:"item"`
	Details   any             `json:"details,omitempty"`
	Events    []tools.Event   `json:"events,omitempty"`
	Repairs   []string        `json:"repairs,omitempty"`
	Activity  string          `json:"activity,omitempty"`
	Duration  time.Duration   `json:"-"` // duration_ms in JSON (outcome_json.go)
	EndTurn   bool            `json:"end_turn,omitempty"`
	Complete  bool            `json:"complete_actor_event,omitempty"`
	// Loaded are the keys of deferred tools a tool search loaded.
	Loaded []string `json:"loaded,omitempty"`
	// MediaNotes, when Item's output is an array, are its parts' notes
	// (protocol.CallOutput.MediaNotes), kept so that a step.done built
	// from a replayed outcome can still say what it left out and where.
	MediaNotes []string `json:"media_notes,omitempty"`
	// Replayed is set when the outcome came from the journal.
	Replayed bool `json:"-"`
	// Ran is set when the tool ran in this attempt.
	Ran bool `json:"-"`
	// Reused is set when the call id was the claim of a different call.
	Reused bool `json:"-"`
	// bounded is set once the outcome is clipped to the event budget.
	bounded bool
}

// Status is "ok" or "error".
func (o *Outcome) Status() string {
	if o.Err != nil {
		return protocol.StatusError
	}
	return protocol.StatusOK
}

// Result is how a step ended.
type Result struct {
	// Outcomes are in call order, one per call.
	Outcomes           []*Outcome
	EndTurn            bool
	CompleteActorEvent bool
	// Abandoned is set when ctx ended for a reason other than the turn's
	// cancel (the worker is shutting down): the calls that were cut short
	// were neither stored nor reported, and the step must be delivered
	// again.
	Abandoned bool
	// Held, when set, is a step held for approval: nothing ran.
	Held []HeldCall
}

// Items returns the output items in call order.
func (r *Result) Items() []json.RawMessage {
	items := make([]json.RawMessage, len(r.Outcomes))
	for i, o := range r.Outcomes {
		items[i] = o.Item
	}
	return items
}

// MediaNotes returns the outcomes' media notes in call order
// (protocol.StepDone.MediaNotes), or nil when no output holds media.
func (r *Result) MediaNotes() [][]string {
	var notes [][]string
	for i, o := range r.Outcomes {
		if len(o.MediaNotes) > 0 {
			if notes == nil {
				notes = make([][]string, len(r.Outcomes))
			}
			notes[i] = o.MediaNotes
		}
	}
	return notes
}

// Dispatcher runs the calls of a step against a turn's set. The zero
// value works; it is safe for concurrent use by many steps.
type Dispatcher struct {
	// MaxParallel bounds the calls of one step running at once.
	MaxParallel int
	// Timeout is the default limit of one call.
	Timeout time.Duration
	// Repair tunes the argument repair ladder.
	Repair schema.RepairOptions
	// SearchLimit is how many deferred tools one tool search loads.
	SearchLimit int
	// Journal, when set, makes calls effectively-once across redelivery.
	Journal Journal
	// Observer, when set, is told of calls starting and ending.
	Observer Observer
	// Tracer, when set, records a span per call with "validate" and
	// "execute" children, under the span in the step's context.
	Tracer trace.Tracer
	// Meter, when set, is told of calls for metrics.
	Meter Meter
	// Goroutines, when set, runs calls on kept goroutines; otherwise each
	// call starts one.
	Goroutines *Goroutines
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxEventBytes, when set, bounds the encoding of one call's outcome
	// (protocol.EventBudget of the connection's max payload): larger
	// outcomes are clipped (protocol.CallOutput.Fit) before they are
	// stored and reported, so that the journal record and the call.output
	// event both fit.
	MaxEventBytes int
	// MediaBudget bounds the data URLs of one output's images and files
	// (media.DefaultBudget), and is at most half of MaxEventBytes.
	MediaBudget int
	// MediaSlots, when set, bounds the pixels of the images decoded and
	// scaled at once by every step of this dispatcher (a 25-megapixel
	// image holds up to ~360 MB).
	MediaSlots media.Slots
}

// pending is one call on its way through a step: what resolving it
// found and, once it runs, what the call and its watchdog share. One
// allocation holds it all, the outcome of a call that ran included.
type pending struct {
	d        *Dispatcher
	call     protocol.Call
	ref      CallRef
	inv      *tools.Invocation
	timeout  time.Duration
	search   bool
	parallel bool
	outcome  *Outcome // set early for calls that run nothing
	// With a Tracer: the call's span, and the context that carries it.
	span    trace.Span
	spanCtx context.Context

	// Set when the call starts.
	g       *group
	set     *Set
	turnCtx context.Context
	ctx     callContext
	cancel  context.CancelCauseFunc
	began   time.Time
	// finished is set by whichever ends the call first: the tool
	// returning, or the watchdog.
	finished atomic.Bool
	expired  bool // guarded by the step's inflight.mu
	out      Outcome
	progress progressState // the call's reporter, when the observer publishes progress
}

// Run dispatches one step: every call is resolved and validated, then
// consecutive parallel calls run together and each sequential call runs
// alone, in call order. Every call gets an outcome, whatever happens:
//
//   - a tool result with EndTurn lets the calls running beside it finish,
//     and the calls after its group are not run (kind aborted);
//   - cancelling ctx (the turn's abort) ends running calls and skips the
//     rest (kind aborted);
//   - a call past its timeout ends with kind timeout, a panic with
//     tool_error; neither stops the other calls.
func (d *Dispatcher) Run(ctx context.Context, set *Set, in Input) *Result {
	res := &Result{Outcomes: make([]*Outcome, len(in.Calls))}
	ps := make([]*pending, len(in.Calls))
	for i, c := range in.Calls {
		ps[i] = d.resolve(ctx, set, in, c)
	}
	d.checkReuse(ctx, ps)
	if in.Approval != nil && ctx.Err() == nil {
		if held := d.hold(ps, in.Approval); held != nil {
			return &Result{Held: held}
		}
	}
	step := &inflight{}
	defer step.stop()
	defer context.AfterFunc(ctx, step.abort)()
	var endedBy *Outcome
	for i := 0; i < len(ps); {
		j := i + 1
		if ps[i].parallel {
			for j < len(ps) && ps[j].parallel {
				j++
			}
		}
		group := ps[i:j]
		if endedBy != nil {
			for _, p := range group {
				if p.outcome == nil {
					p.outcome = errorOutcome(p.call, tools.Errorf(tools.Aborted,
						"Not run: call %s (%s) ended the turn before this call started.", endedBy.CallID, endedBy.Name))
				}
				d.ended(ctx, p)
			}
		} else {
			d.runGroup(ctx, set, group, step)
		}
		for _, p := range group {
			if p.outcome.EndTurn && endedBy == nil {
				endedBy = p.outcome
			}
		}
		i = j
	}
	for i, p := range ps {
		res.Outcomes[i] = p.outcome
		res.EndTurn = res.EndTurn || p.outcome.EndTurn
		res.CompleteActorEvent = res.CompleteActorEvent || p.outcome.Complete
	}
	if ctx.Err() != nil {
		res.Abandoned = abandoned(ctx)
		res.EndTurn = true
	}
	return res
}

// resolve finds the call's tool and validates its arguments. Calls that
// cannot run get their outcome here and count as parallel: they neither
// wait for nor hold up anything.
func (d *Dispatcher) resolve(ctx context.Context, set *Set, in Input, c protocol.Call) *pending {
	p := &pending{d: d, call: c, parallel: true, ref: CallRef{AgentID: in.AgentID, TurnID: in.TurnID, Step: in.Step, CallID: c.CallID}}
	if d.Journal != nil {
		p.ref.Digest = protocol.CallDigest(c)
	}
	if d.Tracer != nil {
		p.spanCtx, p.span = spans.ExecuteTool(ctx, d.Tracer, displayName(c), c.CallID)
	}
	if c.Type == protocol.ItemToolSearchCall {
		p.search = true
		return p
	}
	held := in.Stored[c.CallID]
	if held != nil {
		if held.Outcome != nil {
			p.outcome = held.Outcome
			return p
		}
		// Approved: the value validated when the step was held runs, not
		// the model's text again.
		c.Arguments = string(held.Valid)
	}
	t := set.Lookup(c.Namespace, c.Name)
	if t == nil {
		p.outcome = errorOutcome(c, tools.Errorf(tools.UnknownTool, "There is no tool %s in this turn. Call only the tools listed for this turn.", displayName(c)))
		return p
	}
	sp := t.Spec()
	// A stored call of a deferred tool was loaded when it was held; the
	// loaded set may have left TURN_STATE with its TTL while a person
	// decided.
	if sp.DeferLoading && held == nil && !in.Loaded[ToolKey(sp.Namespace, sp.Name)] {
		p.outcome = errorOutcome(c, tools.Errorf(tools.NotLoaded, "The tool %s is deferred and has not been loaded in this turn. Call tool_search with what you need first; it loads the tool with its full definition.", displayName(c)))
		return p
	}
	var vspan trace.Span
	if p.span != nil {
		_, vspan = d.Tracer.Start(p.spanCtx, "validate")
	}
	inv, err := tools.Prepare(t, c.Arguments, d.Repair.Limit)
	var te *tools.Error
	if err != nil && !errors.As(err, &te) {
		te = &tools.Error{Kind: tools.InvalidArguments, Message: err.Error()}
	}
	// The rungs that ran are reported on a refusal too.
	var repairs []string
	if inv != nil {
		repairs = inv.Repairs
	} else if te != nil {
		repairs = te.Repairs
	}
	if vspan != nil {
		if len(repairs) > 0 {
			vspan.SetAttributes(spans.RepairsKey.StringSlice(repairs))
		}
		if err != nil {
			vspan.SetStatus(codes.Error, "invalid arguments")
		}
		vspan.End()
	}
	if err != nil {
		p.outcome = errorOutcome(c, te)
		p.outcome.Repairs = repairs
		return p
	}
	p.inv = inv
	if held != nil {
		inv.Repairs = held.Repairs
	}
	p.parallel = sp.ExecutionMode == tools.Parallel
	p.timeout = sp.Timeout
	if p.timeout == 0 {
		p.timeout = d.Timeout
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
	return p
}

func (d *Dispatcher) runGroup(ctx context.Context, set *Set, ps []*pending, step *inflight) {
	g := &group{step: step}
	limit := d.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	if len(ps) > limit {
		g.sem = make(chan struct{}, limit)
	}
	for _, p := range ps {
		if p.outcome != nil {
			d.ended(ctx, p)
			continue
		}
		g.acquire()
		p.g, p.set, p.turnCtx = g, set, ctx
		d.Goroutines.run(p)
	}
	g.wg.Wait()
}

// group bounds the calls of a group running at once (sem is nil when the
// group is no larger than the bound) and waits for them.
type group struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	step *inflight
}

func (g *group) acquire() {
	if g.sem != nil {
		g.sem <- struct{}{}
	}
	g.wg.Add(1)
}

// release is called once a call's outcome is stored and reported, which
// for a tool that ignores its context is before the goroutine running it
// returns.
func (g *group) release() {
	if g.sem != nil {
		<-g.sem
	}
	g.wg.Done()
}

// inflight tracks the calls of a step that are running. It holds the
// step's one timer, which fires at the earliest deadline of its running
// calls, and it lets the turn's abort start their watchdogs: one timer and
// one registration on the turn's context per step instead of one per
// call.
type inflight struct {
	mu      sync.Mutex
	calls   []*pending
	aborted bool
	stopped bool // the step is over: the timer stays stopped
	timer   *time.Timer
	next    time.Time // when timer fires, if armed
}

// add registers a running call whose deadline is set. It reports false
// when the turn was aborted before: the call's watchdog must start.
func (f *inflight) add(p *pending) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, p)
	if f.next.IsZero() || p.ctx.deadline.Before(f.next) {
		f.arm(p.ctx.deadline)
	}
	return !f.aborted
}

func (f *inflight) remove(p *pending) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.calls {
		if c == p {
			last := len(f.calls) - 1
			f.calls[i], f.calls[last] = f.calls[last], nil
			f.calls = f.calls[:last]
			return
		}
	}
}

// arm sets the timer to fire at t. The caller holds mu.
func (f *inflight) arm(t time.Time) {
	if f.stopped {
		return
	}
	f.next = t
	if f.timer == nil {
		f.timer = time.AfterFunc(time.Until(t), f.expire)
		return
	}
	f.timer.Reset(time.Until(t))
}

// expire ends the time of every running call past its deadline, and
// arms the timer for the next deadline.
func (f *inflight) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	f.next = time.Time{}
	var next time.Time
	for _, p := range f.calls {
		switch {
		case p.expired:
		case !p.ctx.deadline.After(now):
			p.expired = true
			go p.expire()
		case next.IsZero() || p.ctx.deadline.Before(next):
			next = p.ctx.deadline
		}
	}
	if !next.IsZero() {
		f.arm(next)
	}
}

// abort starts the watchdog of every running call.
func (f *inflight) abort() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted = true
	for _, p := range f.calls {
		go p.watchdog()
	}
}

// stop stops the timer once the step is over.
func (f *inflight) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.timer != nil {
		f.timer.Stop()
	}
}

// run is the call's own goroutine. The common path, a validated call
// that runs, stays in small stack frames: a goroutine starts with a small
// stack, and growing it was a visible part of the dispatch cost.
func (p *pending) run() {
	if (p.search || p.d.Journal != nil || p.turnCtx.Err() != nil) && p.answered() {
		p.g.release()
		return
	}
	if p.d.Observer != nil || p.d.Meter != nil {
		p.started()
	}
	p.invoke()
}

func (p *pending) started() {
	if p.d.Observer != nil {
		p.d.Observer.CallStarted(p.ref, p.call, p.inv.Activity)
	}
	if p.d.Meter != nil {
		p.d.Meter.CallStarted(p.inv.Tool.Name())
	}
}

// answered settles, off the common path, a call that comes after the
// turn's abort, a tool search, and a call an earlier attempt settled (the
// journal's claim). It reports whether the call has its outcome without
// running.
func (p *pending) answered() bool {
	ctx, d := p.turnCtx, p.d
	if err := context.Cause(ctx); err != nil {
		// A search loads tools into the turn: after the turn's abort it is
		// answered like any other call, not run.
		p.outcome = notRun(p.call, err)
		d.ended(ctx, p)
		return true
	}
	if p.search {
		p.outcome = d.search(p.set, p.call)
		d.ended(ctx, p)
		return true
	}
	if d.Journal == nil {
		return false
	}
	stored, err := d.Journal.Claim(ctx, p.ref)
	sp := p.inv.Tool.Spec()
	switch {
	case err == nil && stored == nil && context.Cause(ctx) != nil:
		// The turn was aborted while the claim was on its way (a journal
		// need not stop waiting for it): the call is claimed but not run,
		// and its stored outcome says so to a redelivery.
		p.outcome = notRun(p.call, context.Cause(ctx))
		d.store(ctx, p)
		return true
	case errors.Is(err, ErrReused):
		// Not stored: the journal keeps the call that owns the id.
		p.outcome = reusedOutcome(p.call, p.ref.Step)
		d.ended(ctx, p)
		return true
	case err == nil && stored != nil:
		stored.Replayed = true
		p.outcome = stored
		d.ended(ctx, p)
		return true
	case errors.Is(err, ErrClaimed) && !sp.ReadOnly:
		p.outcome = errorOutcome(p.call, tools.Errorf(tools.Interrupted,
			"An earlier attempt at this call stopped while %s was running, so it may have taken effect in part. It is not run again: check its effects before calling it again.", sp.Name))
		d.store(ctx, p)
		return true
	case errors.Is(err, ErrClaimed):
		// A read-only tool changes nothing: running it again is safe.
	case err != nil:
		p.outcome = errorOutcome(p.call, tools.Errorf(tools.Internal, "The call could not be recorded before running, so it was not run: %v", err))
		d.ended(ctx, p)
		return true
	}
	return false
}

// checkReuse answers as reused the calls that failed before running
// whose ids the journal holds for another call: their own outcome would
// go out under the first version's message id and be dropped as its
// duplicate, leaving the gateway the old outcome.
func (d *Dispatcher) checkReuse(ctx context.Context, ps []*pending) {
	rc, ok := d.Journal.(ReuseChecker)
	if !ok {
		return
	}
	var refs []CallRef
	for _, p := range ps {
		if p.outcome != nil {
			refs = append(refs, p.ref)
		}
	}
	if len(refs) == 0 {
		return
	}
	reused, err := rc.ReusedIDs(ctx, refs)
	if err != nil {
		d.logger().Warn("checking a step's failed calls for reused call ids failed", "agent_id", refs[0].AgentID, "turn_id", refs[0].TurnID, "step", refs[0].Step, "err", err)
		return
	}
	for _, p := range ps {
		if p.outcome != nil && reused[p.call.CallID] {
			p.outcome = reusedOutcome(p.call, p.ref.Step)
		}
	}
}

// reusedOutcome answers a call whose id an earlier version of its step
// used for another call.
func reusedOutcome(c protocol.Call, step int64) *Outcome {
	o := errorOutcome(c, tools.Errorf(tools.InvalidArguments,
		"Not run: the call id %q was already used in step %d of this turn for a different call (another tool or other arguments), and a call id names one call. Call again with a new call id.",
		protocol.ClipText(c.CallID, 300), step))
	o.Reused = true
	return o
}

// notRun is the outcome of a call the turn's abort (cause) kept from
// running.
func notRun(c protocol.Call, cause error) *Outcome {
	return errorOutcome(c, tools.Errorf(tools.Aborted, "Not run: %v.", cause))
}

// abandoned reports whether ctx ended for a reason other than the turn's
// cancel.
func abandoned(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrCancelled)
}

// store records the outcome in the journal, then reports it. An outcome
// cut short by an abandoned step is neither: the redelivery decides.
func (d *Dispatcher) store(ctx context.Context, p *pending) {
	d.bound(p)
	if d.Journal != nil && !abandoned(ctx) {
		// The outcome is stored even when the turn is being aborted: a
		// redelivery must not run the call again.
		if err := d.Journal.Store(context.WithoutCancel(ctx), p.ref, p.outcome); err != nil {
			d.storeFailed(p, err)
		}
	}
	d.ended(ctx, p)
}

func (d *Dispatcher) storeFailed(p *pending, err error) {
	d.logger().Error("storing a call outcome failed; a redelivery will report it interrupted",
		"agent_id", p.ref.AgentID, "turn_id", p.ref.TurnID, "step", p.ref.Step, "call_id", p.ref.CallID, "err", err)
}

func (d *Dispatcher) ended(ctx context.Context, p *pending) {
	d.bound(p)
	if p.span != nil {
		p.endSpan()
	}
	if abandoned(ctx) {
		return
	}
	if d.Meter != nil && !p.outcome.Replayed {
		d.Meter.CallEnded(p.outcome)
	}
	if d.Observer != nil {
		d.Observer.CallEnded(p.ref, p.outcome)
	}
}

// bound clips p's outcome to MaxEventBytes. Outcomes far below the
// budget, the common case, are recognised without encoding them.
func (d *Dispatcher) bound(p *pending) {
	o, budget := p.outcome, d.MaxEventBytes
	if budget <= 0 || o.bounded {
		return
	}
	o.bounded = true
	size := len(o.Item) + len(o.Activity) + len(o.Name) + len(o.Namespace) + len(o.CallID)
	if o.Err != nil {
		size += len(o.Err.Message)
	}
	for _, r := range o.Repairs {
		size += len(r)
	}
	// The media notes travel in the journal's record beside the item, not
	// in the event: the event is fitted to what they leave.
	notes := 0
	for _, n := range o.MediaNotes {
		notes += len(n) + 3
	}
	budget -= notes
	size += notes
	if size < budget/4 && o.Details == nil && o.Events == nil {
		return
	}
	ev := &protocol.CallOutput{
		Type: protocol.EventCallOutput, AgentID: p.ref.AgentID, TurnID: p.ref.TurnID, Step: p.ref.Step,
		CallID: o.CallID, Name: o.Name, Namespace: o.Namespace, Status: o.Status(), Error: fit.Error(o.Err),
		Item: o.Item, Details: fit.Details(o.Details), Events: fit.Events(o.Events), Repairs: o.Repairs, Activity: o.Activity,
	}
	ev.MediaNotes = o.MediaNotes
	if err := fit.CallOutput(ev, budget); err != nil {
		d.logger().Warn("a call's outcome does not fit one event even clipped", "call_id", o.CallID, "err", err)
	}
	if o.Err != nil && ev.Error.Message != o.Err.Message {
		// A copy: the error may be shared with the outcome it came from.
		o.Err = &tools.Error{Kind: o.Err.Kind, Message: ev.Error.Message}
	}
	if o.Details != nil {
		o.Details = ev.Details
	}
	o.Item, o.Events, o.Repairs, o.Activity = ev.Item, fit.ToolEvents(ev.Events), ev.Repairs, ev.Activity
	if !bytes.Contains(o.Item, []byte(`"output":[`)) {
		o.MediaNotes = nil // the media are gone: nothing left to note
	}
}

func (p *pending) endSpan() {
	if p.outcome.Err != nil {
		spans.Fail(p.span, string(p.outcome.Err.Kind))
	}
	p.span.End()
}

// returnGrace is how long a tool has to return once its context ended. A
// tool that honours its context returns within it, and its answer (often
// the partial output of the work it stopped) is kept.
const returnGrace = time.Second

// invoke runs the tool, in the call's goroutine, with its time limit,
// then stores and reports the outcome and releases the call's place in
// its group, exactly once. A tool that ignores its context is left behind
// when the limit and returnGrace pass: a watchdog finishes the call for
// it, and the tool's late result is dropped. In the common case, a tool
// that returns in time, the watchdog never starts.
func (p *pending) invoke() {
	parent := p.turnCtx
	var espan trace.Span
	if p.span != nil {
		parent, espan = p.executeSpan()
	}
	// The step's timer serves as the call's deadline and its watchdog:
	// when the deadline passes it cancels the call (cause errCallTimeout)
	// and starts the watchdog. The context still reports the deadline
	// (callContext).
	ctx, cancel := context.WithCancelCause(parent)
	p.cancel = cancel
	p.began = time.Now()
	p.ctx.Context = ctx
	p.ctx.Call = tools.Call{AgentID: p.ref.AgentID, TurnID: p.ref.TurnID, Step: int(p.ref.Step), CallID: p.ref.CallID}
	p.ctx.deadline = p.began.Add(p.timeout)
	p.withProgress()
	// The watchdog starts when the time limit passes (inflight.expire), or
	// when the turn is aborted (inflight.abort); neither happens to a call
	// that returns in time.
	if !p.g.step.add(p) {
		go p.watchdog() // the turn was aborted before the call registered
	}
	res, err := p.inv.Run(&p.ctx)
	// Ended before the outcome is published: once step.done is out, every
	// span of the step's calls has ended.
	if espan != nil {
		espan.End()
	}
	p.g.step.remove(p)
	if p.finished.CompareAndSwap(false, true) {
		p.finish(res, err)
	}
}

// executeSpan starts the call's "execute" span, under which the tool's
// own spans nest.
func (p *pending) executeSpan() (context.Context, trace.Span) {
	return p.d.Tracer.Start(p.spanCtx, "execute")
}

// finish stores and reports the outcome of a call that ran, and releases
// its place in its group.
func (p *pending) finish(res tools.Result, err error) {
	p.endProgress() // before the call's completed event
	p.outcome = p.d.outcome(p, res, err, time.Since(p.began))
	p.d.store(p.turnCtx, p)
	p.g.release()
	p.cancel(nil)
}

// expire ends the call's time: its context is cancelled with the timeout
// cause, and the watchdog gives the tool returnGrace to return.
func (p *pending) expire() {
	p.cancel(errCallTimeout)
	p.watchdog()
}

// watchdog runs when the call's time limit passes or its turn is aborted
// while the tool runs. A tool that returns within returnGrace has ended
// the call itself by then, and the watchdog does nothing.
func (p *pending) watchdog() {
	time.Sleep(returnGrace)
	if !p.finished.CompareAndSwap(false, true) {
		return
	}
	p.d.logger().Warn("tool did not return after its context ended; its result will be dropped",
		"tool", p.call.Name, "call_id", p.ref.CallID, "cause", context.Cause(&p.ctx))
	p.finish(tools.Result{}, p.ctx.Err())
}

// callContext is a call's context: cancelled by the call's own timer or
// the turn's abort, reporting the timer's deadline as a context with a
// timeout would (so tools can pass it on to HTTP clients and MCP
// sessions), and carrying the call's identity.
type callContext struct {
	tools.CallContext
	deadline time.Time
}

func (c *callContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *callContext) Err() error {
	if context.Cause(c.Context) == errCallTimeout {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// outcome builds, in p's own storage, the outcome of a call that ran.
func (d *Dispatcher) outcome(p *pending, res tools.Result, err error, took time.Duration) *Outcome {
	o := &p.out
	*o = Outcome{CallID: p.call.CallID, Name: p.call.Name, Namespace: p.call.Namespace, Repairs: p.inv.Repairs, Ran: true, Duration: took,
		Details: res.Details, Events: res.Events}
	if err != nil {
		o.Err = classify(err, &p.ctx, p.turnCtx, p.timeout)
		o.Item, o.MediaNotes = d.outputItem(p.turnCtx, p.call.CallID, failureText(o.Err, res.Content), res.Media)
		o.Activity = p.inv.Activity
		return o
	}
	o.EndTurn, o.Complete = res.EndTurn, res.CompleteActorEvent
	o.Item, o.MediaNotes = d.outputItem(p.turnCtx, p.call.CallID, res.Content, res.Media)
	o.Activity = p.inv.CompletedActivity(res)
	return o
}

// classify decides the error kind of a failed run: the clock and the
// turn's abort take precedence over whatever the tool said about them.
func classify(err error, callCtx, turnCtx context.Context, timeout time.Duration) *tools.Error {
	if context.Cause(callCtx) == errCallTimeout && turnCtx.Err() == nil {
		return tools.Errorf(tools.Timeout, "The call did not finish within %s and was stopped.", timeout)
	}
	if turnCtx.Err() != nil {
		return tools.Errorf(tools.Aborted, "The call was aborted: %v.", context.Cause(turnCtx))
	}
	var te *tools.Error
	if errors.As(err, &te) {
		return te
	}
	return &tools.Error{Kind: tools.ToolError, Message: err.Error()}
}

func failureText(e *tools.Error, content string) string {
	text := fmt.Sprintf("Error (%s): %s", e.Kind, e.Message)
	if content != "" {
		text += "\n" + content
	}
	return text
}

func errorOutcome(c protocol.Call, e *tools.Error) *Outcome {
	o := &Outcome{CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Err: e}
	if c.Type == protocol.ItemToolSearchCall {
		o.Item = mustJSON(protocol.ToolSearchOutput{Type: protocol.ItemToolSearchOutput, CallID: c.CallID, Execution: "client", Status: "completed", Tools: []json.RawMessage{}})
	} else {
		o.Item = functionOutput(c.CallID, failureText(e, ""))
	}
	return o
}

// outputItem builds the function_call_output of a call that ran, the one
// place that does: text alone is a string (functionOutput); with media it
// is an array of the text, then each medium fitted to the media budget
// (an input_image, an input_file, or the input_text note that replaced
// it), with the notes that would replace them later. Media that all came
// back as notes leave a string again. The fitting runs after the call's
// time (the tool has returned) but stops with the turn (ctx): an aborted
// turn's step does not wait for images to be decoded.
func (d *Dispatcher) outputItem(ctx context.Context, callID, text string, ms []tools.Media) (json.RawMessage, []string) {
	if len(ms) == 0 {
		return functionOutput(callID, text), nil
	}
	items := make([]media.Item, len(ms))
	for i, m := range ms {
		items[i] = media.Item(m)
	}
	fo := protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID}
	var notes, texts []string
	if text != "" {
		fo.Content = append(fo.Content, protocol.InputContent{Type: protocol.ContentText, Text: text})
		notes, texts = append(notes, ""), append(texts, text)
	}
	kept := false
	for _, p := range media.Fit(ctx, items, d.mediaBudget(), media.Options{Slots: d.MediaSlots}) {
		c := protocol.InputContent{Type: protocol.ContentText, Text: p.Text}
		switch p.Kind {
		case media.Image:
			c = protocol.InputContent{Type: protocol.ContentImage, ImageURL: p.URL, Detail: protocol.DetailAuto}
		case media.File:
			c = protocol.InputContent{Type: protocol.ContentFile, Filename: p.Filename, FileData: p.URL}
		default:
			texts = append(texts, p.Text)
		}
		kept = kept || p.Kind != media.Text
		fo.Content, notes = append(fo.Content, c), append(notes, p.Note)
	}
	if !kept {
		return functionOutput(callID, strings.Join(texts, "\n")), nil
	}
	return mustJSON(fo), notes
}

func (d *Dispatcher) mediaBudget() int {
	b := d.MediaBudget
	if b <= 0 {
		b = media.DefaultBudget
	}
	if d.MaxEventBytes > 0 {
		b = min(b, d.MaxEventBytes/2)
	}
	return b
}

// functionOutput is protocol.FunctionCallOutput marshalled by hand: it is
// built for every call, and the encoder's reflection was a visible part of
// the dispatch cost. TestFunctionOutputMatchesEncoder holds it to
// encoding/json's bytes.
func functionOutput(callID, text string) json.RawMessage {
	b := make([]byte, 0, len(`{"type":"function_call_output","call_id":"","output":""}`)+len(callID)+len(text)+8)
	b = append(b, `{"type":"function_call_output","call_id":`...)
	b = appendJSONString(b, callID)
	b = append(b, `,"output":`...)
	b = appendJSONString(b, text)
	return append(b, '}')
}

// appendJSONString appends s as a JSON string the way encoding/json
// writes it: <, > and & escaped for HTML, U+2028 and U+2029 escaped, and
// invalid UTF-8 replaced with U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// displayName is the call's tool as the model named it, for messages and
// span names. A model can send any name, of any size: a name longer than
// any tool's (the tools' names are at most 64 bytes) is quoted clipped,
// so that an unknown tool's output does not echo a megabyte.
func displayName(c protocol.Call) string {
	name := c.Name
	if c.Namespace != "" {
		name = c.Namespace + "." + c.Name
	}
	return protocol.ClipText(name, maxNameQuote)
}

// maxNameQuote bounds a tool name quoted into a message or a span name.
const maxNameQuote = 256

// ToolKey names a tool in a turn's loaded set.
func ToolKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "." + name
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}
