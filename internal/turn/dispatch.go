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
	// st is the state whose record this is, set once for the state's life
	// (Dispatcher.state), as ps[i] is: a pointer a step need not write is a
	// write barrier fewer, twice a call, while the collector marks.
	st     *stepState
	call   *protocol.CallItem // in the step's Input
	digest string             // the call's JournalRef.Digest
	// invocation is the call's, once its arguments validated (valid):
	// its Tool is set then, where a pointer to it was stored (and cleared)
	// per call.
	invocation tools.Invocation
	timeout    time.Duration
	search     bool
	// record is set for a read-only call that runs before it is
	// journaled, with one write after (Recorder).
	record   bool
	parallel bool
	outcome  *Outcome // set early for calls that run nothing
	// With a Tracer: the call's span (spanCtx is the context that
	// carries it, made when needed: 16 bytes less of every call's record,
	// which a step in flight keeps).
	span trace.Span

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
	// running is set while the call is registered on its step's
	// inflight (add to remove), expired once its time is up; both are
	// guarded by the inflight's mu.
	running, expired bool
}

// stepState is a step's working state: its calls' records, the timer of
// its running calls and the group waiting for them. It goes back to the
// Dispatcher's pool when the step ends with nothing else looking at it
// (inflight.escaped): the step's own allocation was a third of a no-op
// step's cost, most of it the garbage collector's.
type stepState struct {
	// calls[i]'s invocation keeps the parameters' storage of its last
	// call when the state is put back (tools.Invocation.Park, in
	// pending.reset): a step of the tools its state ran last decodes its
	// arguments into it, not into the tool's pool's.
	calls []pending
	ps    []*pending
	step  inflight
	group group
	// What every call of the step shares.
	d               *Dispatcher
	hooks           *Hooks
	obs             *stepObserver // a Runner's step's observer, in place of hooks
	set             *Set
	ctx             context.Context // the turn's
	agentID, turnID string
	stepN           int64
	// items is the step's slab of output items (itemBytes), for a step
	// of more than one running call, itemsFor of them: made by the first
	// call that ends with a short item. itemsUsed is the bytes handed out,
	// with slabMaking while the slab is made and slabReady once it is.
	// The three fit where the step's fairness key was (kept in its
	// stepOut): a step in flight keeps its state.
	items     []byte
	itemsFor  int32
	itemsUsed atomic.Int32

	// Where the step is between its groups (runGroups): the group running
	// (ps[cur:next]), the call that ended the turn (ps[endedAt-1], when
	// not 0), its result's allocation, and what ends the step's watch on
	// its abort. done, for a step started with Start, is told its result.
	// The indexes are int32 so that the state stays within 448 bytes.
	cur, next, endedAt int32
	out                *stepOut
	aborts             Aborter
	stopWatch          func() bool
	done               func(*StepResult)
}

// stepOut is what a step allocates besides its calls' cells: its result
// and the identity its calls share. For a step of a few calls, its
// outcomes' slice and its cells are in the same allocation
// (newStepOut). One allocation where there were three.
type stepOut struct {
	res StepResult
	// call is what the calls' contexts share of their identity, and start
	// when the step's calls began to run: their deadlines are durations
	// after it (cell.due).
	call  tool.Call
	start time.Time
}

// smallStep is the most calls whose outcomes' slice is in the stepOut's
// allocation, and the most running calls whose cells are.
const smallStep = 8

// newStepOut returns the stepOut of a step of n calls and the cells of
// the running calls among them. For up to smallStep running calls (the
// default MaxParallel) both are one allocation, sized to the cells: the
// cells outlive the step as the result does, and the size classes of the
// two apart round up more than the one (eight cells, 2,816 bytes, take
// 3,072 alone; with the stepOut's 192 bytes and the header of an object
// with pointers, 3,016, they still do). A step of one call has room for
// one outcome only: with its cell, 488 bytes where eight outcomes' room
// took it to 544, a size class up (576), kept by every step in flight.
func newStepOut(n, running int) (*stepOut, []cell) {
	if n == 1 {
		if running == 0 {
			return withCells(func(*[0]cell) []cell { return nil }, func(o *[1]*Outcome) []*Outcome { return o[:] })
		}
		return withCells(func(c *[1]cell) []cell { return c[:] }, func(o *[1]*Outcome) []*Outcome { return o[:] })
	}
	var out *stepOut
	var cells []cell
	switch running {
	case 0:
		out, cells = withCells(func(*[0]cell) []cell { return nil }, outsOf)
	case 1:
		out, cells = withCells(func(c *[1]cell) []cell { return c[:] }, outsOf)
	case 2:
		out, cells = withCells(func(c *[2]cell) []cell { return c[:] }, outsOf)
	case 3:
		out, cells = withCells(func(c *[3]cell) []cell { return c[:] }, outsOf)
	case 4:
		out, cells = withCells(func(c *[4]cell) []cell { return c[:] }, outsOf)
	case 5:
		out, cells = withCells(func(c *[5]cell) []cell { return c[:] }, outsOf)
	case 6:
		out, cells = withCells(func(c *[6]cell) []cell { return c[:] }, outsOf)
	case 7:
		out, cells = withCells(func(c *[7]cell) []cell { return c[:] }, outsOf)
	case 8:
		out, cells = withCells(func(c *[8]cell) []cell { return c[:] }, outsOf)
	default:
		out, cells = withCells(func(*[0]cell) []cell { return nil }, outsOf)
		cells = make([]cell, running)
	}
	if n > smallStep {
		out.res.Outcomes = make([]*Outcome, n)
	} else {
		out.res.Outcomes = out.res.Outcomes[:n:n]
	}
	return out, cells
}

// outsOf is the outcomes' slice of a step of 2 to smallStep calls.
func outsOf(o *[smallStep]*Outcome) []*Outcome { return o[:] }

// withCells allocates a stepOut, an array O of outcomes and an array of
// cells C in one object; cells and outs return the arrays' cells and
// outcomes. The stepOut's result has the outcomes' slice.
func withCells[C, O any](cells func(*C) []cell, outs func(*O) []*Outcome) (*stepOut, []cell) {
	s := new(struct {
		out   stepOut
		outs  O
		cells C
	})
	s.out.res.Outcomes = outs(&s.outs)
	return &s.out, cells(&s.cells)
}

// maxPooledCalls bounds the steps whose state is kept for reuse: a rare
// step of many calls does not leave its records in the pool.
const maxPooledCalls = 64

// state returns a step state for n calls, its records zero.
func (d *Dispatcher) state(n int) *stepState {
	st, _ := d.states.Get().(*stepState)
	if st == nil {
		st = &stepState{}
		st.step.st = st
	}
	if cap(st.calls) < n {
		st.calls, st.ps = make([]pending, n), make([]*pending, n)
		// ps[i] is &calls[i] for the state's life: a step writes no
		// pointer it need not (each is a write barrier while the collector
		// marks).
		for i := range st.calls {
			st.ps[i] = &st.calls[i]
			st.calls[i].st = st
		}
	}
	st.calls, st.ps = st.calls[:n], st.ps[:n]
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
			if p := &st.calls[i]; p.valid() {
				p.invocation.Release()
			}
		}
		return
	}
	for i := range st.calls {
		st.calls[i].reset() // parks the call's parameters
	}
	st.step.reset()
	st.group.sem = nil
	st.d, st.hooks, st.obs, st.set, st.ctx, st.agentID, st.turnID = nil, nil, nil, nil, nil, "", ""
	st.items, st.itemsFor = nil, 0
	st.itemsUsed.Store(0)
	st.cur, st.next, st.endedAt = 0, 0, 0
	st.out, st.aborts, st.stopWatch, st.done = nil, nil, nil, nil
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
	res := d.begin(ctx, set, &in, st)
	if res == nil {
		st.runGroups(true)
		res = st.finish()
	}
	d.release(st)
	return res
}

// Start dispatches one step as Run does, without holding the calling
// goroutine while the calls run: done is called once with the step's
// result, by the goroutine that gives back the step's last running call
// (a call's helper, or the watchdog of a call whose tool ignores its
// context), or by this one when nothing is left to wait for. A step in
// flight so keeps no goroutine of its own, only its calls' ones.
func (d *Dispatcher) Start(ctx context.Context, set *Set, in Input, done func(*StepResult)) {
	st := d.state(len(in.Calls))
	if res := d.begin(ctx, set, &in, st); res != nil {
		d.release(st)
		done(res)
		return
	}
	st.done = done
	if st.runGroups(false) {
		st.complete()
	}
}

// begin resolves the step's calls, readies their cells and watches the
// step's abort. A step held for approval returns its result at once.
func (d *Dispatcher) begin(ctx context.Context, set *Set, in *Input, st *stepState) *StepResult {
	st.d, st.hooks, st.obs, st.set, st.ctx = d, in.Hooks, in.obs, set, ctx
	st.agentID, st.turnID, st.stepN = in.AgentID, in.TurnID, in.Step
	ps := st.ps
	for i := range in.Calls {
		p := ps[i]
		d.resolve(ctx, set, in, &in.Calls[i], p)
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
		if p.valid() && p.outcome == nil {
			running++
		}
	}
	out, cells := newStepOut(len(ps), running)
	st.out = out
	if running > 0 {
		out.call = tool.Call{AgentID: in.AgentID, TurnID: in.TurnID, Step: in.Step, FairKey: in.FairKey}
		for _, p := range ps {
			if p.valid() && p.outcome == nil {
				p.cell, cells = &cells[0], cells[1:]
			}
		}
		out.start = time.Now()
		if running > 1 && running <= maxPooledCalls {
			st.itemsFor = int32(running)
		}
	}
	step := &st.step
	switch {
	case in.Aborts != nil: // the caller aborts the step itself: no watch on ctx
		st.aborts = in.Aborts
		in.Aborts.OnAbort(step.abort)
	case ctx.Done() != nil: // a context that can never end needs no watch
		st.stopWatch = context.AfterFunc(ctx, step.abort)
	}
	return nil
}

// runGroups runs the step's groups from st.next on: consecutive parallel
// calls together, each sequential call alone. With wait each group is
// waited for here. Without, a group with calls to run is handed to its
// helpers and runGroups returns false: the group's last place given back
// (group.give) goes on with the step, and the caller must look at
// nothing of it any more.
func (st *stepState) runGroups(wait bool) bool {
	ps := st.ps
	for int(st.next) < len(ps) {
		i, j := int(st.next), int(st.next)+1
		if ps[i].parallel {
			for j < len(ps) && ps[j].parallel {
				j++
			}
		}
		group := ps[i:j]
		st.cur, st.next = int32(i), int32(j)
		if st.endedAt != 0 {
			endedBy := ps[st.endedAt-1].outcome
			for _, p := range group {
				if p.outcome == nil {
					p.outcome = errorOutcome(*p.call, tool.Errorf(tool.Aborted,
						"Not run: call %s (%s) ended the turn before this call started.", endedBy.CallID, endedBy.Name))
				}
				st.d.ended(st.ctx, p)
			}
		} else if !st.d.runGroup(st.ctx, group, &st.group, wait) {
			return false
		}
		st.groupEnded()
	}
	return true
}

// groupEnded notes the call of the group that just ended (ps[cur:next])
// that ended the turn, if any.
func (st *stepState) groupEnded() {
	for i := st.cur; i < st.next && st.endedAt == 0; i++ {
		if st.ps[i].outcome.EndTurn {
			st.endedAt = i + 1
		}
	}
}

// resume goes on with a started step once the group it waited for ended:
// called by the goroutine that gave back the group's last place.
func (st *stepState) resume() {
	st.group.ps = st.group.ps[:0]
	st.groupEnded()
	if st.runGroups(false) {
		st.complete()
	}
}

// complete ends a started step and tells its done. The state goes back
// to the pool first: done may take long (it publishes the step's end).
func (st *stepState) complete() {
	res, done := st.finish(), st.done
	st.d.release(st)
	done(res)
}

// finish collects the result of a step whose groups all ended, and ends
// the watch on its abort.
func (st *stepState) finish() *StepResult {
	res := &st.out.res
	for i, p := range st.ps {
		res.Outcomes[i] = p.outcome
		res.EndTurn = res.EndTurn || p.outcome.EndTurn
		res.CompleteActorEvent = res.CompleteActorEvent || p.outcome.Complete
	}
	if st.ctx.Err() != nil {
		res.Abandoned = abandoned(st.ctx)
		res.EndTurn = true
	}
	step := &st.step
	switch {
	case st.aborts != nil:
		if !st.aborts.StopAbort() {
			step.escape() // the abort is under way or over
		}
	case st.stopWatch != nil:
		if !st.stopWatch() {
			step.escape() // the abort is under way or over
		}
	}
	step.stop(&st.d.progress)
	return res
}

// resolve finds the call's tool and validates its arguments. Calls that
// cannot run get their outcome here and count as parallel: they neither
// wait for nor hold up anything.
func (d *Dispatcher) resolve(ctx context.Context, set *Set, in *Input, call *protocol.CallItem, p *pending) {
	// p is zero but for its st (a step state's records are reset when they are put
	// back): set field by field, since assigning a whole pending copies
	// it through the write barrier.
	c := call
	p.call, p.parallel = call, true
	if d.Journal != nil {
		p.digest = CallDigest(*c)
	}
	if d.Tracer != nil {
		_, p.span = spans.ExecuteTool(ctx, d.Tracer, displayName(*c), c.CallID)
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
		_, vspan = d.Tracer.Start(p.spanCtx(), "validate")
	}
	te := p.invocation.Prepare(t, args, d.Repair.Limit) // into the record's parked parameters, when t's
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
		if repairs != nil {
			p.outcome.more().Repairs = repairs
		}
		return
	}
	if held != nil {
		p.invocation.Repairs = held.Repairs
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

// runGroup runs one group of the step's calls. With wait it returns once
// they all ended, true. Without, it returns false once the group is
// handed to its helpers, unless no call of it runs; its last place given
// back resumes the step. A group larger than MaxParallel is always waited
// for: without wait, a goroutine of its own runs it and the rest of the
// step.
func (d *Dispatcher) runGroup(ctx context.Context, ps []*pending, g *group, wait bool) bool {
	limit := d.MaxParallel
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	if len(ps) > limit {
		if !wait {
			go ps[0].st.rest()
			return false
		}
		d.runBounded(ctx, ps, g, limit)
		return true
	}
	// A group whose calls all run (the common case) is taken from ps
	// itself; otherwise the ones to run are copied to g.buf, which keeps
	// its storage from group to group, and step to step. Copying every
	// group was a pointer written per call, a write barrier while the
	// collector marks.
	run := ps
	if anyAnswered(ps) {
		run = g.buf[:0]
		for _, p := range ps {
			if p.outcome != nil {
				d.ended(ctx, p)
				continue
			}
			run = append(run, p)
		}
		g.buf = run
	}
	if len(run) == 0 {
		return true
	}
	// One helper starts the group; every helper that takes a call while
	// calls are left makes sure another is on its way (group.take).
	g.ps = run
	g.next.Store(0)
	g.spares.Store(1)
	g.async = !wait
	if g.async {
		g.places.Store(1)
		d.Goroutines.run(run[0])
		return false
	}
	g.wg.Add(1)
	d.Goroutines.run(run[0])
	g.wg.Wait()
	g.ps = g.ps[:0]
	return true
}

// anyAnswered reports whether a call of ps has its outcome already.
func anyAnswered(ps []*pending) bool {
	for _, p := range ps {
		if p.outcome != nil {
			return true
		}
	}
	return false
}

// rest runs a started step's group larger than MaxParallel, and the
// groups after it, waiting for each, then completes the step: on a
// goroutine of its own, as Run would.
func (st *stepState) rest() {
	st.d.runBounded(st.ctx, st.ps[st.cur:st.next], &st.group, st.d.MaxParallel)
	st.groupEnded()
	st.runGroups(true)
	st.complete()
}

// runBounded runs a group larger than MaxParallel: a goroutine per call,
// each started once one of the limit running ends.
func (d *Dispatcher) runBounded(ctx context.Context, ps []*pending, g *group, limit int) {
	if limit <= 0 {
		limit = DefaultMaxParallel
	}
	g.sem, g.async = make(chan struct{}, limit), false
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
//
// The group's places are counted by wg when the step waits for the group
// (Run), or by places when it does not (Start, async): then whoever gives
// back the last place resumes the step (stepState.resume), so that no
// goroutine waits for the group.
type group struct {
	sem    chan struct{}
	wg     sync.WaitGroup
	places atomic.Int32
	async  bool
	ps     []*pending // the calls to run, taken in order; empty for sem
	buf    []*pending // ps's storage when not all of a group's calls run
	next   atomic.Int32
	spares atomic.Int32
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
func (g *group) release(st *stepState) {
	if g.sem != nil {
		<-g.sem
	}
	g.give(st)
}

// hold takes one more place in the group, for a holder of one.
func (g *group) hold() {
	if g.async {
		g.places.Add(1)
		return
	}
	g.wg.Add(1)
}

// give gives a place back in st's group. The last one of a group nobody
// waits for resumes st: after give the caller looks at nothing of the
// step.
func (g *group) give(st *stepState) {
	if !g.async {
		g.wg.Done()
		return
	}
	if g.places.Add(-1) == 0 {
		st.resume()
	}
}

// run is a helper's goroutine: given the first call of a group it runs
// the group's calls (group.take), given a call of a bounded group it
// runs that call. The common path, a validated call that runs, stays in
// small stack frames: a goroutine starts with a small stack, and growing
// it was a visible part of the dispatch cost.
func (p *pending) run() {
	st := p.st
	if st.group.sem != nil {
		if !p.start() {
			st.group.release(st)
			return
		}
		if p.invoke() {
			st.group.release(st)
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
			st.group.give(st)
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
		g.hold()
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
	if o := p.st.obs; o != nil {
		o.started(p.ref(), *p.call, p.invocation.Activity)
	} else if h := p.st.hooks; h != nil && h.Started != nil {
		h.Started(p.ref(), *p.call, p.invocation.Activity)
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
func (st *stepState) since() time.Duration { return time.Since(st.out.start) }

// valid reports whether the call's arguments validated: its invocation
// is ready to run.
func (p *pending) valid() bool { return p.invocation.Tool != nil }

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
	if o := p.st.obs; o != nil {
		if !abandoned(ctx) {
			o.ended(p.ref(), p.outcome)
		}
		return
	}
	if h := p.st.hooks; h == nil || h.Ended == nil || abandoned(ctx) {
		return
	}
	p.st.hooks.Ended(p.ref(), p.outcome)
}

// spanCtx is the step's context carrying the call's span.
func (p *pending) spanCtx() context.Context { return trace.ContextWithSpan(p.st.ctx, p.span) }

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
		parent, espan = p.st.d.Tracer.Start(p.spanCtx(), "execute") // the tool's own spans nest under it
	}
	// The step's deadline serves as the call's deadline and its watchdog:
	// when the deadline passes it cancels the call (cause
	// tools.ErrTimedOut) and starts the watchdog. The context still
	// reports the deadline (cell.due).
	c := p.cell
	c.cancel.parent = parent
	if p.st.d.Journal != nil { // the claim took its time
		p.began = p.st.since()
	}
	// The call's id is its outcome's from the start: the context reads
	// it there (cell.Value), and outcome does not write it again.
	c.step, c.out.CallID = p.st.out, p.call.CallID
	c.due = p.began + p.timeout
	p.withProgress()
	// The watchdog starts when the time limit passes (inflight.expire), or
	// when the turn is aborted (inflight.abort); neither happens to a call
	// that returns in time.
	if !p.st.step.add(p) {
		go p.watchdog() // the turn was aborted before the call registered
	}
	res, err := p.invocation.Run(c)
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
	st := p.st // p may be reused once released
	p.settle(&res, err)
	st.group.release(st)
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
