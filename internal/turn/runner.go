package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// Emitter publishes a step's events. The worker implements it on NATS:
// CallOutput and StepDone return once the event is stored in the outputs
// stream; Activity is fire-and-forget.
type Emitter interface {
	CallOutput(ctx context.Context, ev *protocol.CallOutput) error
	StepDone(ctx context.Context, ev *protocol.StepDone) error
	Activity(agentID, turnID string, a protocol.Activity)
}

// State is the per-turn state a step reads and writes (TURN_STATE).
type State interface {
	// Cancelled reports whether the turn was cancelled, and why.
	Cancelled(ctx context.Context, agentID, turnID string) (bool, string, error)
	// Loaded returns the keys of the deferred tools the turn has loaded.
	Loaded(ctx context.Context, agentID, turnID string) (map[string]bool, error)
	// AddLoaded records more loaded deferred tools.
	AddLoaded(ctx context.Context, agentID, turnID string, keys []string) error
}

// ErrAbandoned is returned by Runner.Run when the worker gave the step up
// (shutdown) before it ended: nothing was reported, and the step must be
// delivered again.
var ErrAbandoned = errors.New("step abandoned before it ended")

// Runner runs a main-turn step that came off the wire: the turn's set is
// assembled from the step's context, the calls dispatched, each outcome
// published as it ends, then step.done.
type Runner struct {
	Assembler  *Assembler
	Dispatcher Dispatcher
	Emitter    Emitter
	State      State
	// Cancels, when set, lets turn.cancel reach the step's running calls.
	Cancels *Cancels
	// Approval is the worker's approval policy for main turns, and
	// Approvals keeps the steps it holds (approval.go).
	Approval  Policy
	Approvals Approvals
	// Hooks, when set, are told of every step's calls after the step's
	// own events are published (the worker's metrics).
	Hooks *Hooks
}

// Run runs one step. A nil error means every event is stored and the step
// can be acknowledged; any error means it must be delivered again.
func (r *Runner) Run(ctx context.Context, st *protocol.Step) error {
	ctx, span := r.Process(ctx, st)
	defer span.End()
	var gate *Policy
	if policy := r.Approval.With(st.Context.Approval); policy.Destructive || policy.All || len(policy.Names) > 0 {
		gate = &policy
	}
	res, err := r.dispatchIn(ctx, st, nil, gate, nil, r.Approvals != nil)
	if err != nil {
		return err
	}
	return r.end(ctx, st, res)
}

// end publishes the end of a main-turn step whose calls were dispatched:
// its hold, or its step.done.
func (r *Runner) end(ctx context.Context, st *protocol.Step, res *StepResult) error {
	if res.Held != nil {
		return r.holdStep(ctx, st, res.Held)
	}
	if holdsInput(res) { // a call waits for a person's input (approval.go)
		return r.holdInput(ctx, st, res)
	}
	return r.Emitter.StepDone(ctx, res.stepDone(st))
}

// Start runs one step as Run does, without holding the calling goroutine
// while the step's calls run: done is called once with what Run would
// return, on this goroutine when the step ends before any call runs, or
// else on the goroutine that ends its last call (Dispatcher.Start). A
// step in flight so keeps no goroutine waiting for its calls: a
// goroutine's own record alone is about half a KiB of heap.
func (r *Runner) Start(ctx context.Context, st *protocol.Step, done func(error)) {
	ctx, span := r.Process(ctx, st)
	var gate *Policy
	if policy := r.Approval.With(st.Context.Approval); policy.Destructive || policy.All || len(policy.Names) > 0 {
		gate = &policy
	}
	e, in, err := r.prepare(ctx, st, nil, gate, nil, r.Approvals != nil)
	if err != nil {
		span.End()
		done(err)
		return
	}
	// What the step's end needs is the func's, not the entry's: 48
	// bytes a step in flight keeps either way, but the entry of a step
	// Run runs stays in its size class.
	r.Dispatcher.Start(e.runCtx(), in.set, in.Input, func(res *StepResult) {
		ctx := e.ctx.parent
		res, err := r.afterDispatch(ctx, e, st, res)
		if err == nil {
			err = r.end(ctx, st, res)
		}
		span.End()
		done(err)
	})
}

// stepDone is the step.done of a main-turn step, held or not.
func (r *StepResult) stepDone(st *protocol.Step) *protocol.StepDone {
	done := &protocol.StepDone{
		Type: protocol.EventStepDone, AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step,
		Items: r.Items(), EndTurn: r.EndTurn || len(st.Calls) == 0, CompleteActorEvent: r.CompleteActorEvent,
		MediaNotes: r.MediaNotes(),
	}
	r.Version(st, done)
	return done
}

// Version sets the message id version of a step's step.done
// (docs/protocol.md, "Reused call ids"): a step that reused a call id for
// a different call is another version of its step number. Only the
// journal can tell: two attempts of one step running at once (a lease
// lost in a fault) both claim calls for the first time, so that is no
// sign of another version.
func (r *StepResult) Version(st *protocol.Step, done *protocol.StepDone) {
	for _, o := range r.Outcomes {
		if o.Reused {
			done.Version = StepDigest(st)
			return
		}
	}
}

// Process starts the consumer span of handling st (when the dispatcher
// has a tracer), as a child of the gateway's span in ctx. Every event of
// the step, step.done included, is published with the returned context,
// so that each gets its publish span under this one and carries that
// span's traceparent. The caller ends the span once step.done is out.
func (r *Runner) Process(ctx context.Context, st *protocol.Step) (context.Context, trace.Span) {
	if tr := r.Dispatcher.Tracer; tr != nil {
		return spans.ProcessStep(ctx, tr, st)
	}
	return ctx, trace.SpanFromContext(ctx)
}

// Dispatch assembles the set (from st's context, or set when given),
// dispatches the calls and publishes every call.output, but not
// step.done: task turns add their verdict to it. ctx is the one Process
// returned, whose span the caller ends after step.done.
func (r *Runner) Dispatch(ctx context.Context, st *protocol.Step, set *Set) (*StepResult, error) {
	return r.dispatch(ctx, st, set, nil, nil)
}

// dispatch is Dispatch, with a main turn's approval gate (a step held
// comes back with StepResult.Held, nothing run nor published), or with the
// stored calls of a decided pending step.
func (r *Runner) dispatch(ctx context.Context, st *protocol.Step, set *Set, gate *Policy, stored map[string]*HeldCall) (*StepResult, error) {
	return r.dispatchIn(ctx, st, set, gate, stored, false)
}

// dispatchIn is dispatch; with allowInput, the step's calls may be held
// for input (InputAllowed), as allowInput(ctx, r) would let them, without
// the context.WithValue every step in flight kept: the step's context
// answers it (stepContext).
func (r *Runner) dispatchIn(ctx context.Context, st *protocol.Step, set *Set, gate *Policy, stored map[string]*HeldCall, allowInput bool) (*StepResult, error) {
	e, in, err := r.prepare(ctx, st, set, gate, stored, allowInput)
	if err != nil {
		return nil, err
	}
	res := r.Dispatcher.Run(e.runCtx(), in.set, in.Input)
	return r.afterDispatch(ctx, e, st, res)
}

// dispatchInput is what prepare readied for the Dispatcher.
type dispatchInput struct {
	Input
	set *Set
}

// prepare tracks the step, reads its turn's state and assembles its set
// (unless given): all that comes before its calls are dispatched with the
// returned input, in the entry's context (stepEntry.runCtx). The entry is
// released by afterDispatch, or here on an error.
func (r *Runner) prepare(ctx context.Context, st *protocol.Step, set *Set, gate *Policy, stored map[string]*HeldCall, allowInput bool) (e *stepEntry, in dispatchInput, err error) {
	// The step is tracked before the cancel mark is read, and a cancel
	// message writes the mark before it aborts tracked steps: a step that
	// starts while its turn is being cancelled sees one or the other.
	if budget := r.Dispatcher.MaxEventBytes; budget > 0 {
		if need := protocol.MinStepDoneBytes(st); need > budget {
			return nil, in, fmt.Errorf("%w: its %d calls need a step.done of at least %d bytes even with every output clipped to a note, over the %d byte limit of one event; send fewer calls per step",
				protocol.ErrMalformed, len(st.Calls), need, budget)
		}
	}
	// The turn's own state is read and written with the step's context,
	// not the one a cancel aborts: a cancelled turn's step still needs its
	// tools and loaded set to answer every call aborted.
	stepCtx := ctx
	_, entry := r.Cancels.track(ctx, st.AgentID, st.TurnID, st.Step)
	defer func() {
		if err != nil {
			entry.release() // e is nil by now
		}
	}()
	e = entry
	e.allowInput = allowInput
	cancelled, reason, err := r.State.Cancelled(stepCtx, st.AgentID, st.TurnID)
	if err != nil {
		return nil, in, fmt.Errorf("reading the turn's cancel mark: %w", err)
	}
	if cancelled {
		e.abort(cancelCause(reason))
	}
	if set == nil {
		set, err = r.Assembler.Assemble(stepCtx, Env{AgentID: st.AgentID, TurnID: st.TurnID, Context: st.Context})
		if err != nil {
			return nil, in, fmt.Errorf("assembling the turn's tools: %w", err)
		}
	}
	var loaded map[string]bool
	if len(set.Deferred()) > 0 {
		if loaded, err = r.State.Loaded(stepCtx, st.AgentID, st.TurnID); err != nil {
			return nil, in, fmt.Errorf("reading the turn's loaded tools: %w", err)
		}
	}
	e.observe(r)
	in = dispatchInput{Input: Input{AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step, Calls: st.Calls, FairKey: st.FairKey(),
		Loaded: loaded, Approval: gate, Stored: stored, obs: (*stepObserver)(e), Aborts: e}, set: set}
	return e, in, nil
}

// afterDispatch is what comes after a step's calls ended: their loaded
// tools recorded, the entry released.
func (r *Runner) afterDispatch(stepCtx context.Context, e *stepEntry, st *protocol.Step, res *StepResult) (*StepResult, error) {
	defer e.release()
	if res.Held != nil {
		return res, nil
	}
	if res.Abandoned {
		return nil, ErrAbandoned
	}
	if err := (*stepObserver)(e).err(); err != nil {
		return nil, err
	}
	var keys []string
	for _, o := range res.Outcomes {
		keys = append(keys, o.Loaded()...)
	}
	if len(keys) > 0 {
		if err := r.State.AddLoaded(stepCtx, st.AgentID, st.TurnID, keys); err != nil {
			return nil, fmt.Errorf("recording loaded tools: %w", err)
		}
	}
	return res, nil
}

// runCtx is the context the step's calls run in: the entry's own, which
// a step whose calls may be held for input answers InputAllowed with
// (stepContext), without the context.WithValue every step in flight kept.
func (e *stepEntry) runCtx() context.Context {
	if e.allowInput {
		return (*stepContext)(e)
	}
	return &e.ctx
}

// stepObserver publishes activity, progress and call.output events as
// calls start, report and end, then tells the Runner's own hooks. It is
// its step's stepEntry: the step's context (the events' context) and the
// lock of its first error are the entry's, not copies of their own.
type stepObserver stepEntry

// observe readies the entry's observer for r: the step's Input.obs.
func (e *stepEntry) observe(r *Runner) *stepObserver {
	o := (*stepObserver)(e)
	o.r = r
	return o
}

// stepContext is the context of a step whose calls may be held for input:
// the step's own (stepEntry.ctx), which also answers InputAllowed with
// the entry's Runner.
type stepContext stepEntry

func (c *stepContext) Deadline() (time.Time, bool) { return c.ctx.Deadline() }
func (c *stepContext) Done() <-chan struct{}       { return c.ctx.Done() }
func (c *stepContext) Err() error                  { return c.ctx.Err() }

func (c *stepContext) Value(key any) any {
	if _, ok := key.(inputAllowedKey); ok {
		return c.r
	}
	return c.ctx.Value(key)
}

// events is the context the step's events are published with.
func (o *stepObserver) events() context.Context { return context.WithoutCancel(&o.ctx) }

// fail keeps err as the step's error unless one is kept already.
func (o *stepObserver) fail(err error) {
	o.ctx.mu.Lock()
	if o.first == nil {
		o.first = err
	}
	o.ctx.mu.Unlock()
}

func (o *stepObserver) started(ref JournalRef, c protocol.CallItem, label string) {
	o.r.Emitter.Activity(ref.AgentID, ref.TurnID, protocol.Activity{CallID: c.CallID, Name: c.Name, State: "started", Label: label})
	o.r.Hooks.started(ref, c, label)
}

// progress publishes a progress event, fire-and-forget like the other
// activity events.
func (o *stepObserver) progress(ref JournalRef, a protocol.Activity) {
	o.r.Emitter.Activity(ref.AgentID, ref.TurnID, a)
}

func (o *stepObserver) ended(ref JournalRef, out *Outcome) {
	defer o.r.Hooks.ended(ref, out)
	if HeldForInput(out) {
		return // its call.output waits for the answer (approval.go)
	}
	if out.Ran {
		o.r.Emitter.Activity(ref.AgentID, ref.TurnID, protocol.Activity{CallID: out.CallID, Name: out.Name, State: "completed", Label: out.Activity})
	}
	if out.Err != nil && out.Err.Auth != nil {
		o.authRequired(ref, out)
	}
	ev := out.event(ref)
	if ev.Details == nil {
		ev.Details = json.RawMessage("{}")
	}
	if ev.Events == nil {
		ev.Events = []protocol.PresentationEvent{}
	}
	if ev.Repairs == nil {
		ev.Repairs = []string{}
	}
	// The event is published even while the turn is being aborted: the
	// gateway is owed an output for every call.
	if err := o.r.Emitter.CallOutput(o.events(), ev); err != nil {
		o.fail(fmt.Errorf("publishing call.output for %s: %w", out.CallID, err))
	}
}

// authRequired publishes the auth.required event (protocol 1.3) of a call
// that needs an account connected, before its call.output, on an emitter
// that publishes events (the worker's); a failure counts as the
// call.output's would.
func (o *stepObserver) authRequired(ref JournalRef, out *Outcome) {
	em, ok := o.r.Emitter.(interface {
		Event(ctx context.Context, subject, msgID string, v any) error
	})
	if !ok {
		return
	}
	ev := &protocol.AuthRequiredEvent{Type: protocol.EventAuthRequired, AgentID: ref.AgentID, TurnID: ref.TurnID, Step: ref.Step,
		CallID: out.CallID, Server: out.Err.Auth.Server, URL: out.Err.Auth.URL}
	if err := em.Event(o.events(), protocol.Subject(protocol.PrefixOutput, ev.AgentID, ev.TurnID), ev.MsgID(), ev); err != nil {
		o.fail(fmt.Errorf("publishing auth.required for %s: %w", out.CallID, err))
	}
}

func (o *stepObserver) err() error {
	o.ctx.mu.Lock()
	defer o.ctx.mu.Unlock()
	return o.first
}

// Cancels tracks the running steps of this worker by turn, so that a
// turn.cancel message can abort their calls. The zero value is not
// usable; use NewCancels. A nil *Cancels tracks nothing.
type Cancels struct {
	mu sync.Mutex
	// running holds each turn's steps as a list: a turn has one step
	// running at a time but for a redelivery, and a map per turn was two
	// allocations of every step. It is keyed by a hash of the turn
	// (turnKey.hash), whose entries take a third of a turnKey's in a map
	// of thousands of steps in flight: a list holds the steps of every
	// turn of that hash, each step with its turnKey.
	running map[uint32]*stepEntry
	seed    maphash.Seed
	// parents watches the contexts the steps came with, one
	// context.AfterFunc per Done channel (the worker's, for all its
	// steps) rather than one per step.
	parents map[<-chan struct{}]*parentWatch
}

// parentWatch is the registration on a Done channel that steps share, and
// how many steps use it.
type parentWatch struct {
	steps int
	stop  func() bool
}

// turnKey names a turn in Cancels: a pair, not the two ids joined, whose
// string every step in flight kept.
type turnKey struct{ agentID, turnID string }

// hash is the key's place in c.running: 32 bits, which a stepEntry keeps
// beside its two flags in one word; turns whose hashes collide share a
// list.
func (c *Cancels) hash(k turnKey) uint32 { return uint32(maphash.Comparable(c.seed, k)) }

// stepEntry is a running step: its registration in Cancels, its
// context's one cancellation, the abort of its running calls (Aborter),
// and the observer of its calls, in one allocation that a
// step in flight keeps until it ends.
//
// The step's context is not a child of the one it came with: a child is
// an entry in its parent's children, and a registration on it
// (context.AfterFunc) a map of children of its own, with a Done channel;
// together more than half a KiB of every step in flight. A turn's cancel
// reaches the step here (abort), and the parent's end through the
// Cancels' one registration on the parent's Done channel (parentWatch).
type stepEntry struct {
	c          *Cancels // nil: not registered
	key        turnKey
	step       int64
	parent     <-chan struct{} // the parent's Done, when it can end
	stopParent func() bool     // undoes the parent's AfterFunc (no Cancels)
	prev, next *stepEntry      // guarded by c.mu
	hash       uint32          // c.hash(key)
	released   bool            // guarded by c.mu
	aborted    bool            // guarded by ctx.mu
	allowInput bool            // its calls may be held for input (stepContext)
	onAbort    func()          // the dispatcher's abort of the step's calls, guarded by ctx.mu

	// ctx is the step's context: the values and deadline of the one it
	// came with, with a cancellation of its own, made when something
	// asks for its Done channel or its cause (a step in flight most often
	// never does), here so that it is no allocation of its own. Its lock
	// also guards the entry's abort and its observer's error: lazyCancel
	// calls nothing of the entry while it holds it, and the entry calls
	// the abort of its calls (whose contexts' parent is ctx) only once it
	// let go of it.
	ctx lazyCancel
	// The observer of the step's calls (stepObserver): the Runner whose
	// Emitter publishes their events, and the first publish that failed.
	r     *Runner
	first error
}

// NewCancels returns an empty tracker.
func NewCancels() *Cancels {
	return &Cancels{running: map[uint32]*stepEntry{}, parents: map[<-chan struct{}]*parentWatch{}, seed: maphash.MakeSeed()}
}

// track registers a step of the turn and makes its context; the entry's
// release ends its registration and its context.
func (c *Cancels) track(ctx context.Context, agentID, turnID string, step int64) (context.Context, *stepEntry) {
	key := turnKey{agentID, turnID}
	var h uint32
	if c != nil {
		h = c.hash(key)
	}
	return c.trackAt(ctx, key, h, step)
}

// trackAt is track, with the key's hash.
func (c *Cancels) trackAt(ctx context.Context, key turnKey, h uint32, step int64) (context.Context, *stepEntry) {
	e := &stepEntry{c: c, key: key, hash: h, step: step, parent: ctx.Done()}
	e.ctx.parent = ctx
	if c == nil {
		if e.parent != nil {
			e.stopParent = context.AfterFunc(ctx, func() { e.abort(context.Cause(ctx)) })
		}
		return &e.ctx, e
	}
	c.mu.Lock()
	if head := c.running[e.hash]; head != nil {
		e.next, head.prev = head, e
	}
	c.running[e.hash] = e
	if e.parent != nil {
		w := c.parents[e.parent]
		if w == nil {
			// The func runs once the lock is released: the step is listed
			// by then.
			w = &parentWatch{stop: context.AfterFunc(ctx, func() { c.parentDone(e.parent, context.Cause(ctx)) })}
			c.parents[e.parent] = w
		}
		w.steps++
		if ctx.Err() != nil { // ended before: its func may have run already
			e.abort(context.Cause(ctx))
		}
	}
	c.mu.Unlock()
	return &e.ctx, e
}

// parentDone aborts the steps whose parent context ended (done is its
// Done channel), with its cause.
func (c *Cancels) parentDone(done <-chan struct{}, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, head := range c.running {
		for e := head; e != nil; e = e.next {
			if e.parent == done {
				e.abort(cause)
			}
		}
	}
}

// abort cancels the step's context with cause, then aborts its running
// calls: the first time only.
func (e *stepEntry) abort(cause error) {
	e.ctx.with(cause)
	e.ctx.mu.Lock()
	if e.aborted {
		e.ctx.mu.Unlock()
		return
	}
	e.aborted = true
	f := e.onAbort
	e.onAbort = nil
	e.ctx.mu.Unlock()
	if f != nil {
		f()
	}
}

// OnAbort implements Aborter.
func (e *stepEntry) OnAbort(f func()) {
	e.ctx.mu.Lock()
	if !e.aborted {
		e.onAbort = f
		e.ctx.mu.Unlock()
		return
	}
	e.ctx.mu.Unlock()
	f()
}

// StopAbort implements Aborter.
func (e *stepEntry) StopAbort() bool {
	e.ctx.mu.Lock()
	defer e.ctx.mu.Unlock()
	e.onAbort = nil
	return !e.aborted
}

// release ends the step's registration, once, and its context.
func (e *stepEntry) release() {
	if e.stopParent != nil {
		e.stopParent()
	}
	if c := e.c; c != nil {
		c.mu.Lock()
		if !e.released {
			e.released = true
			if w := c.parents[e.parent]; w != nil {
				if w.steps--; w.steps == 0 {
					w.stop()
					delete(c.parents, e.parent)
				}
			}
			switch {
			case e.prev != nil:
				e.prev.next = e.next
			case e.next != nil:
				c.running[e.hash] = e.next
			default:
				delete(c.running, e.hash)
			}
			if e.next != nil {
				e.next.prev = e.prev
			}
		}
		c.mu.Unlock()
	}
	e.ctx.with(nil)
}

// Cancel aborts every running step of the turn on this worker and says
// how many there were. A turn with none here costs one map lookup.
func (c *Cancels) Cancel(agentID, turnID, reason string) int {
	if c == nil {
		return 0
	}
	key := turnKey{agentID, turnID}
	h := c.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	var cause error
	n := 0
	for e := c.running[h]; e != nil; e = e.next {
		if e.key != key {
			continue
		}
		if cause == nil {
			cause = cancelCause(reason)
		}
		e.abort(cause)
		n++
	}
	return n
}

// CancelStep aborts the running calls of one step of the turn on this
// worker (turn.cancel.step) and says whether it ran here.
func (c *Cancels) CancelStep(agentID, turnID string, step int64, reason string) bool {
	if c == nil {
		return false
	}
	key := turnKey{agentID, turnID}
	h := c.hash(key)
	c.mu.Lock()
	defer c.mu.Unlock()
	found := false
	for e := c.running[h]; e != nil; e = e.next {
		if e.key == key && e.step == step {
			e.abort(cancelCause(reason))
			found = true
		}
	}
	return found
}

// cancelCause is the cause of a cancelled turn's context. The reason is
// quoted into the output of every call the cancel reaches, so it is
// bounded (a mark stored before reasons were bounded may be longer).
func cancelCause(reason string) error {
	if reason == "" {
		return ErrCancelled
	}
	return fmt.Errorf("%w (%s)", ErrCancelled, textclip.Reason(reason))
}
