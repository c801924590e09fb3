package turn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
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

// Hooks are told of a step's calls as they start, report progress and
// end (Input.Hooks). A nil field is not called; the funcs are called from
// several goroutines at once.
type Hooks struct {
	// Started is called as a validated call begins to run (not for a call
	// answered without running), with its started activity label.
	Started func(ref JournalRef, c protocol.CallItem, label string)
	// Progress, when set, gives running calls a progress reporter
	// (tool.ReportProgress) and publishes their reports: called on one
	// of the Dispatcher's few publishing goroutines, never the tool's,
	// at most once per
	// ProgressInterval per call, and never after the call's Ended began.
	// It may block (a slow connection) without slowing the tool, whose
	// reports meanwhile only replace the value waiting to go out.
	Progress func(ref JournalRef, a protocol.Activity)
	// Ended is called once per call with its outcome (Outcome.Replayed
	// when it came from the journal), unless the step was abandoned.
	Ended func(ref JournalRef, o *Outcome)
}

func (h *Hooks) started(ref JournalRef, c protocol.CallItem, label string) {
	if h != nil && h.Started != nil {
		h.Started(ref, c, label)
	}
}

func (h *Hooks) ended(ref JournalRef, o *Outcome) {
	if h != nil && h.Ended != nil {
		h.Ended(ref, o)
	}
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
	// Tracer, when set, records a span per call with "validate" and
	// "execute" children, under the span in the step's context.
	Tracer trace.Tracer
	// Goroutines, when set, runs calls on kept goroutines; otherwise each
	// call starts one.
	Goroutines *Goroutines
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// MaxEventBytes, when set, bounds the encoding of one call's outcome
	// (protocol.EventBudget of the connection's max payload): larger
	// outcomes are clipped (fit.CallOutput) before they are
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

	states   sync.Pool     // of *stepState
	progress progressQueue // the calls' progress events that are due
}

// pending is one call on its way through a step: what resolving it
// found and, once it runs, what the call and its watchdog share. A step's
// records are one allocation, reused by later steps (stepState); what
// can be reached once the step is over is in the call's cell instead.
type pending struct {
	st         *stepState
	call       *protocol.CallItem // in the step's Input
	digest     string             // the call's JournalRef.Digest
	inv        *tools.Invocation  // &invocation once the arguments validated
	invocation tools.Invocation
	timeout    time.Duration
	search     bool
	// record is set for a read-only call that runs before it is
	// journaled, with one write after (Recorder).
	record   bool
	parallel bool
	outcome  *Outcome // set early for calls that run nothing
	// With a Tracer: the call's span, and the context that carries it.
	span    trace.Span
	spanCtx context.Context

	// Set when the call starts.
	cell *cell
	// began is when the call started, after the step's start (set as it
	// is handed over): a reading of the monotonic clock, where time.Now
	// reads two clocks. end is when it ended, which is when the next
	// call its helper takes starts.
	began, end time.Duration
	// finished is set by whichever ends the call first: the tool
	// returning, or the watchdog.
	finished atomic.Bool
	expired  bool // guarded by the step's inflight.mu
}

// cell is the part of a call's state that outlives its step: the
// outcome the caller keeps, and the context the tool ran in, which a tool
// may keep too (a goroutine it left behind still finds it cancelled, and
// its progress reports dropped). A step's cells are one allocation, made
// only for the calls that run. Its size is what a step allocates, and so
// how often the collector runs: the output item is an allocation of its
// own, exactly its size (a 160-byte buffer for short items here cost more
// than the allocation it saved).
type cell struct {
	out      Outcome
	ctx      callCtx
	cancel   lazyCancel // ctx's cancellation
	progress progressState
}

// stepState is a step's working state: its calls' records, the timer of
// its running calls and the group waiting for them. It goes back to the
// Dispatcher's pool when the step ends with nothing else looking at it
// (inflight.escaped): the step's own allocation was a third of a no-op
// step's cost, most of it the garbage collector's.
type stepState struct {
	calls []pending
	ps    []*pending
	// spares[i] keeps the parameters' storage of calls[i]'s last
	// invocation (tools.Invocation.Park): a step of the tools its state
	// ran last decodes its arguments into it, not into the tool's pool's.
	// Not cleared with the records.
	spares []tools.Spare
	run    []*pending // the calls of the group running
	step   inflight
	group  group
	// What every call of the step shares.
	d               *Dispatcher
	hooks           *Hooks
	set             *Set
	ctx             context.Context // the turn's
	agentID, turnID string
	stepN           int64
	start           time.Time // when the step's calls began to run
	// call is what the calls' contexts share of their identity (in the
	// step's stepOut, which outlives the step as they may).
	call *tool.Call
	// items is the step's slab of output items (itemBytes), for a step
	// of more than one running call, itemsFor of them: made by the first
	// call that ends with a short item. itemsUsed is the bytes handed out,
	// with slabMaking while the slab is made and slabReady once it is.
	// The three fit where the step's fairness key was (kept in its
	// stepOut): a step in flight keeps its state.
	items     []byte
	itemsFor  int32
	itemsUsed atomic.Int32
}

// stepOut is what a step allocates besides its calls' cells: its result,
// the identity its calls share, and, for a step of a few calls, its
// outcomes' slice. One allocation where there were three.
type stepOut struct {
	res  StepResult
	call tool.Call
	outs [smallStep]*Outcome
}

// smallStep is the most calls whose outcomes' slice is in the stepOut,
// and the most running calls whose cells are in its allocation.
const smallStep = 8

// newStepOut returns the stepOut of a step of n calls and the cells of
// the running calls among them. For up to smallStep running calls (the
// default MaxParallel) both are one allocation, sized to the cells: the
// cells outlive the step as the result does, and the size classes of the
// two apart round up more than the one (eight cells, 2,816 bytes, take
// 3,072 alone; with the stepOut's 192 bytes and the header of an object
// with pointers, 3,016, they still do).
func newStepOut(n, running int) (*stepOut, []cell) {
	var out *stepOut
	var cells []cell
	switch running {
	case 0:
		out = new(stepOut)
	case 1:
		out, cells = withCells(func(c *[1]cell) []cell { return c[:] })
	case 2:
		out, cells = withCells(func(c *[2]cell) []cell { return c[:] })
	case 3:
		out, cells = withCells(func(c *[3]cell) []cell { return c[:] })
	case 4:
		out, cells = withCells(func(c *[4]cell) []cell { return c[:] })
	case 5:
		out, cells = withCells(func(c *[5]cell) []cell { return c[:] })
	case 6:
		out, cells = withCells(func(c *[6]cell) []cell { return c[:] })
	case 7:
		out, cells = withCells(func(c *[7]cell) []cell { return c[:] })
	case 8:
		out, cells = withCells(func(c *[8]cell) []cell { return c[:] })
	default:
		out, cells = new(stepOut), make([]cell, running)
	}
	if n <= smallStep {
		out.res.Outcomes = out.outs[:n:n]
	} else {
		out.res.Outcomes = make([]*Outcome, n)
	}
	return out, cells
}

// withCells allocates a stepOut and an array of cells C in one object;
// slice returns the array's cells.
func withCells[C any](slice func(*C) []cell) (*stepOut, []cell) {
	s := new(struct {
		out   stepOut
		cells C
	})
	return &s.out, slice(&s.cells)
}

// maxPooledCalls bounds the steps whose state is kept for reuse: a rare
// step of many calls does not leave its records in the pool.
const maxPooledCalls = 64

// state returns a step state for n calls, its records zero.
func (d *Dispatcher) state(n int) *stepState {
	st, _ := d.states.Get().(*stepState)
	if st == nil {
		st = &stepState{}
	}
	if cap(st.calls) < n {
		st.calls, st.ps, st.spares = make([]pending, n), make([]*pending, n), make([]tools.Spare, n)
		// ps[i] is &calls[i] for the state's life: a step writes no
		// pointer it need not (each is a write barrier while the collector
		// marks).
		for i := range st.calls {
			st.ps[i] = &st.calls[i]
		}
	}
	st.calls, st.ps, st.spares = st.calls[:n], st.ps[:n], st.spares[:n]
	return st
}

// release puts st back in the pool, emptied, unless something may still
// look at it.
func (d *Dispatcher) release(st *stepState) {
	if st.step.isEscaped() {
		return
	}
	if cap(st.calls) > maxPooledCalls {
		for i := range st.calls {
			if p := &st.calls[i]; p.inv != nil {
				p.inv.Release()
			}
		}
		return
	}
	for i := range st.calls {
		if p := &st.calls[i]; p.inv != nil {
			p.inv.Park(&st.spares[i])
		}
	}
	clear(st.calls)
	st.step.reset()
	st.group.sem = nil
	st.d, st.hooks, st.set, st.ctx, st.agentID, st.turnID, st.call = nil, nil, nil, nil, "", "", nil
	st.items, st.itemsFor = nil, 0
	st.itemsUsed.Store(0)
	d.states.Put(st)
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
func (d *Dispatcher) Run(ctx context.Context, set *Set, in Input) *StepResult {
	st := d.state(len(in.Calls))
	res := d.run(ctx, set, in, st)
	d.release(st)
	return res
}

func (d *Dispatcher) run(ctx context.Context, set *Set, in Input, st *stepState) *StepResult {
	st.d, st.hooks, st.set, st.ctx = d, in.Hooks, set, ctx
	st.agentID, st.turnID, st.stepN = in.AgentID, in.TurnID, in.Step
	ps := st.ps
	for i := range in.Calls {
		p := ps[i]
		p.st = st
		d.resolve(ctx, set, &in, &in.Calls[i], p, &st.spares[i])
	}
	d.checkReuse(ctx, ps)
	if in.Approval != nil && ctx.Err() == nil {
		if held := d.hold(ps, in.Approval); held != nil {
			return &StepResult{Held: held}
		}
	}
	// One allocation holds the cells of every call that may run.
	running := 0
	for _, p := range ps {
		if p.inv != nil && p.outcome == nil {
			running++
		}
	}
	out, cells := newStepOut(len(ps), running)
	if running > 0 {
		out.call = tool.Call{AgentID: in.AgentID, TurnID: in.TurnID, Step: in.Step, FairKey: in.FairKey}
		st.call = &out.call
		for _, p := range ps {
			if p.inv != nil && p.outcome == nil {
				p.cell, cells = &cells[0], cells[1:]
			}
		}
		st.start = time.Now()
		if running > 1 && running <= maxPooledCalls {
			st.itemsFor = int32(running)
		}
	}
	step := &st.step
	switch {
	case in.Aborts != nil: // the caller aborts the step itself: no watch on ctx
		in.Aborts.OnAbort(step.abort)
		defer func() {
			if !in.Aborts.StopAbort() {
				step.escape() // the abort is under way or over
			}
			step.stop()
		}()
	case ctx.Done() != nil: // a context that can never end needs no watch
		stop := context.AfterFunc(ctx, step.abort)
		defer func() {
			if !stop() {
				step.escape() // the abort is under way or over
			}
			step.stop()
		}()
	default:
		defer step.stop()
	}
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
					p.outcome = errorOutcome(*p.call, tool.Errorf(tool.Aborted,
						"Not run: call %s (%s) ended the turn before this call started.", endedBy.CallID, endedBy.Name))
				}
				d.ended(ctx, p)
			}
		} else {
			d.runGroup(ctx, group, &st.group)
		}
		for _, p := range group {
			if p.outcome.EndTurn && endedBy == nil {
				endedBy = p.outcome
			}
		}
		i = j
	}
	res := &out.res
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
func (d *Dispatcher) resolve(ctx context.Context, set *Set, in *Input, call *protocol.CallItem, p *pending, spare *tools.Spare) {
	// p is zero (a step state's records are cleared when they are put
	// back): set field by field, since assigning a whole pending copies
	// it through the write barrier.
	c := call
	p.call, p.parallel = call, true
	if d.Journal != nil {
		p.digest = CallDigest(*c)
	}
	if d.Tracer != nil {
		p.spanCtx, p.span = spans.ExecuteTool(ctx, d.Tracer, displayName(*c), c.CallID)
	}
	if c.Type == protocol.ItemToolSearchCall {
		p.search = true
		return
	}
	args := c.Arguments
	var held *HeldCall
	if in.Stored != nil {
		held = in.Stored[c.CallID]
	}
	if held != nil {
		if held.Outcome != nil {
			p.outcome = held.Outcome
			return
		}
		// Approved: the value validated when the step was held runs, not
		// the model's text again.
		args = string(held.Valid)
	}
	t := set.Lookup(c.Namespace, c.Name)
	if t == nil {
		t = set.lookupUnlisted(ctx, c.Namespace, c.Name) // unlisted.go
	}
	if t == nil {
		p.outcome = errorOutcome(*c, tool.Errorf(tool.UnknownTool, "There is no tool %s in this turn. Call only the tools listed for this turn.", displayName(*c)))
		return
	}
	sp := t.Spec()
	// A stored call of a deferred tool was loaded when it was held; the
	// loaded set may have left TURN_STATE with its TTL while a person
	// decided.
	if sp.DeferLoading && held == nil && !in.Loaded[ToolKey(sp.Namespace, sp.Name)] {
		p.outcome = errorOutcome(*c, tool.Errorf(tool.NotLoaded, "The tool %s is deferred and has not been loaded in this turn. Call tool_search with what you need first; it loads the tool with its full definition.", displayName(*c)))
		return
	}
	var vspan trace.Span
	if p.span != nil {
		_, vspan = d.Tracer.Start(p.spanCtx, "validate")
	}
	te := p.invocation.PrepareWith(t, args, d.Repair.Limit, spare)
	// The rungs that ran are reported on a refusal too.
	var repairs []string
	if te == nil {
		repairs = p.invocation.Repairs
	} else {
		repairs = te.Repairs
	}
	if vspan != nil {
		if len(repairs) > 0 {
			vspan.SetAttributes(spans.RepairsKey.StringSlice(repairs))
		}
		if te != nil {
			vspan.SetStatus(codes.Error, "invalid arguments")
		}
		vspan.End()
	}
	if te != nil {
		p.outcome = errorOutcome(*c, te)
		p.outcome.Repairs = repairs
		return
	}
	p.inv = &p.invocation
	if held != nil {
		p.inv.Repairs = held.Repairs
	}
	p.parallel = sp.ExecutionMode == tool.Parallel
	p.timeout = sp.Timeout
	if p.timeout == 0 {
		p.timeout = d.Timeout
	}
	if p.timeout == 0 {
		p.timeout = DefaultTimeout
	}
}

func (d *Dispatcher) runGroup(ctx context.Context, ps []*pending, g *group) {
	limit := d.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	if len(ps) > limit {
		d.runBounded(ctx, ps, g, limit)
		return
	}
	st := ps[0].st
	run := st.run[:0]
	for _, p := range ps {
		if p.outcome != nil {
			d.ended(ctx, p)
			continue
		}
		run = append(run, p)
	}
	st.run = run
	if len(run) == 0 {
		return
	}
	// One helper starts the group; every helper that takes a call while
	// calls are left makes sure another is on its way (group.take).
	g.ps = run
	g.next.Store(0)
	g.spares.Store(1)
	g.wg.Add(1)
	d.Goroutines.run(run[0])
	g.wg.Wait()
	g.ps = nil
}

// runBounded runs a group larger than MaxParallel: a goroutine per call,
// each started once one of the limit running ends.
func (d *Dispatcher) runBounded(ctx context.Context, ps []*pending, g *group, limit int) {
	g.sem = make(chan struct{}, limit)
	defer func() { g.sem = nil }()
	for _, p := range ps {
		if p.outcome != nil {
			d.ended(ctx, p)
			continue
		}
		g.acquire()
		// The call's time starts as it is handed over (in invoke, after
		// a journal's claim, when there is one).
		p.began = p.st.since()
		d.Goroutines.run(p)
	}
	g.wg.Wait()
}

// group runs the calls of one group of a step and waits for them. A
// step's groups run one after the other, in the step's one group.
//
// A group no larger than MaxParallel (sem nil) is run by helpers that
// take its calls in order (ps, next): a helper runs the call it took,
// then takes the next one. A call is never left waiting behind one that
// runs: a helper that takes a call while calls are left first makes sure
// another helper is on its way (spares counts the helpers handed the
// group that have not taken a call yet), and that helper takes the next
// call. Calls that end quickly are so run one after the other by the
// first helper or two, instead of handing every call to a goroutine of
// its own: waking a goroutine for each call was most of a no-op step's
// cost. A call that blocks holds up none of the others: the spare takes
// the rest.
//
// A larger group (sem set) hands each call to a goroutine of its own,
// at most sem's capacity at once.
type group struct {
	sem    chan struct{}
	wg     sync.WaitGroup
	ps     []*pending // the calls to run, taken in order; nil for sem
	next   atomic.Int64
	spares atomic.Int64
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

// run is a helper's goroutine: given the first call of a group it runs
// the group's calls (group.take), given a call of a bounded group it
// runs that call. The common path, a validated call that runs, stays in
// small stack frames: a goroutine starts with a small stack, and growing
// it was a visible part of the dispatch cost.
func (p *pending) run() {
	st := p.st
	if st.group.ps == nil {
		if !p.start() {
			st.group.release()
			return
		}
		if p.invoke() {
			st.group.release()
		}
		return
	}
	st.group.spares.Add(-1)
	began := st.since()
	for {
		// The helper holds one place in the group (g.wg) from its
		// arrival on: the place of each call it takes in turn. It is
		// given back once no call is left, or by the watchdog that ends
		// the call holding it. The step ends, and its state may go to
		// another step, as the last place is given back, so that after
		// it this goroutine looks at nothing of the step.
		q := st.group.take(st.d)
		if q == nil {
			st.group.wg.Done()
			return
		}
		q.began = began
		if !q.start() {
			continue
		}
		if !q.invoke() {
			// The watchdog ended the call and gave its place back: the
			// step may be over.
			return
		}
		began = q.end
	}
}

// take takes the group's next call, or returns nil when none is left. The
// call taken holds the helper's place in the group; while calls are left
// behind it, a spare helper is handed the group first, so that they do
// not wait for the call taken to end.
func (g *group) take(d *Dispatcher) *pending {
	i, n := int(g.next.Add(1)-1), len(g.ps)
	if i >= n {
		return nil
	}
	p := g.ps[i]
	if i+1 < n && g.spares.Load() == 0 {
		g.spares.Add(1)
		g.wg.Add(1)
		d.Goroutines.run(p)
	}
	return p
}

// start settles a call that needs no run (answered) and reports it
// started otherwise.
func (p *pending) start() bool {
	if (p.search || p.st.d.Journal != nil || p.st.ctx.Err() != nil) && p.answered() {
		return false
	}
	// The hook's arguments are built only for a hook: a step without
	// one (a benchmark's, a test's) pays nothing for them.
	if h := p.st.hooks; h != nil && h.Started != nil {
		h.Started(p.ref(), *p.call, p.inv.Activity)
	}
	return true
}

// notRun is the outcome of a call the turn's abort (cause) kept from
// running.
func notRun(c protocol.CallItem, cause error) *Outcome {
	return errorOutcome(c, tool.Errorf(tool.Aborted, "Not run: %v.", cause))
}

// abandoned reports whether ctx ended for a reason other than the turn's
// cancel.
func abandoned(ctx context.Context) bool {
	return ctx.Err() != nil && !errors.Is(context.Cause(ctx), ErrCancelled)
}

// since is the time since the step's start.
func (st *stepState) since() time.Duration { return time.Since(st.start) }

// ref is the call's JournalRef.
func (p *pending) ref() JournalRef {
	st := p.st
	return JournalRef{AgentID: st.agentID, TurnID: st.turnID, Step: st.stepN, CallID: p.call.CallID, Digest: p.digest}
}

func (d *Dispatcher) ended(ctx context.Context, p *pending) {
	d.bound(p)
	if p.span != nil {
		p.endSpan()
	}
	if h := p.st.hooks; h == nil || h.Ended == nil || abandoned(ctx) {
		return
	}
	p.st.hooks.Ended(p.ref(), p.outcome)
}

func (p *pending) endSpan() {
	if p.outcome.Err != nil {
		spans.Fail(p.span, string(p.outcome.Err.Kind))
	}
	p.span.End()
}

// invoke runs the tool, in the call's goroutine, with its time limit,
// then stores and reports the outcome and releases the call's place in
// its group, exactly once. A tool that ignores its context is left behind
// when the limit and returnGrace pass: a watchdog finishes the call for
// it, and the tool's late result is dropped. In the common case, a tool
// that returns in time, the watchdog never starts. It reports whether it
// ended the call (finish, not the watchdog): the caller then gives its
// place in the group back.
func (p *pending) invoke() bool {
	parent := p.st.ctx
	var espan trace.Span
	if p.span != nil {
		parent, espan = p.st.d.Tracer.Start(p.spanCtx, "execute") // the tool's own spans nest under it
	}
	// The step's deadline serves as the call's deadline and its watchdog:
	// when the deadline passes it cancels the call (cause
	// tools.ErrTimedOut) and starts the watchdog. The context still
	// reports the deadline (callCtx.Due).
	c := p.cell
	c.cancel.parent = parent
	if p.st.d.Journal != nil { // the claim took its time
		p.began = p.st.since()
	}
	c.ctx.cancel = &c.cancel
	c.ctx.Step, c.ctx.CallID = p.st.call, p.call.CallID
	c.ctx.Due = p.st.start.Add(p.began + p.timeout)
	p.withProgress()
	// The watchdog starts when the time limit passes (inflight.expire), or
	// when the turn is aborted (inflight.abort); neither happens to a call
	// that returns in time.
	if !p.st.step.add(p) {
		go p.watchdog() // the turn was aborted before the call registered
	}
	res, err := p.inv.Run(&c.ctx)
	// Ended before the outcome is published: once step.done is out, every
	// span of the step's calls has ended.
	if espan != nil {
		espan.End()
	}
	p.st.step.remove(p)
	if !p.finished.CompareAndSwap(false, true) {
		return false
	}
	p.settle(&res, err)
	return true
}

// finish is the watchdog's end of a call: it stores and reports the
// outcome and releases the call's place in its group.
func (p *pending) finish(res tool.Result, err error) {
	g := &p.st.group // p may be reused once released
	p.settle(&res, err)
	g.release()
}

// settle stores and reports the outcome of a call that ran, and ends its
// context. The clock reading it takes is p.end.
func (p *pending) settle(res *tool.Result, err error) {
	p.endProgress() // before the call's completed event
	st := p.st
	p.end = st.since()
	p.outcome = st.d.outcome(p, res, err, p.end-p.began)
	st.d.store(st.ctx, p)
	p.cell.cancel.with(nil)
}

// displayName is the call's tool as the model named it, for messages and
// span names. A model can send any name, of any size: a name longer than
// any tool's (the tools' names are at most 64 bytes) is quoted clipped,
// so that an unknown tool's output does not echo a megabyte.
func displayName(c protocol.CallItem) string {
	name := c.Name
	if c.Namespace != "" {
		name = c.Namespace + "." + c.Name
	}
	return textclip.Text(name, maxNameQuote)
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
