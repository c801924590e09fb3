package turn

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// inflight tracks the calls of a step that are running. It holds the
// step's place in its Dispatcher's queue of deadlines, due at the
// earliest deadline of its running calls, and it lets the turn's abort
// start their watchdogs: one deadline and one abort per step instead of
// one per call, and the Dispatcher's one timer for the deadlines of all
// its steps.
type inflight struct {
	mu sync.Mutex
	// st is the state this is the inflight of, set once for its life:
	// its running calls are the records of st.ps marked running, where
	// a slice of them took three pointer writes per call (append, and
	// the swap and clear of its removal), write barriers while the
	// collector marks. expire and abort, which are rare, look at every
	// record of the step instead.
	st      *stepState
	aborted bool
	stopped bool // the step is over: the deadline stays unset
	armed   bool // the deadline is queued and has not come
	// escaped is set once something other than the calls' own goroutines
	// may look at the step's records: a watchdog, the timer's expire, the
	// turn's abort. The step's state is then not reused.
	escaped bool
	dl      deadline // kept, out of the queue, with the step's state
	// next is when dl comes due, if armed, as the time since the step's
	// start (0: not set), which its calls' deadlines are too (pending.due):
	// 8 bytes where a time.Time is 24.
	next time.Duration
}

// add registers a running call whose deadline is set. It reports false
// when the turn was aborted before: the call's context is cancelled, and
// its watchdog must start.
func (f *inflight) add(p *pending) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dl.owner == nil {
		f.dl.owner = f
	}
	p.running = true
	if d := p.due(); f.next == 0 || d < f.next {
		f.arm(p.st, d)
	}
	if f.aborted {
		p.cell.cancel.with(context.Cause(p.st.ctx))
	}
	return !f.aborted
}

func (f *inflight) remove(p *pending) {
	f.mu.Lock()
	p.running = false
	f.mu.Unlock()
}

// arm sets the step's deadline to d after st's start. The caller holds
// mu.
func (f *inflight) arm(st *stepState, d time.Duration) {
	if f.stopped {
		return
	}
	f.next, f.armed = d, true
	st.d.progress.setDeadline(&f.dl, st.out.start.Add(d))
}

// due is the call's deadline, as the time since its step's start: its
// context's Due.
func (p *pending) due() time.Duration { return p.began + p.timeout }

// expire ends the time of every running call past its deadline, and
// sets the step's next deadline.
func (f *inflight) expire() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escaped, f.armed = true, false
	f.next = 0
	var next time.Duration
	st := f.st
	for _, p := range st.ps {
		if !p.running {
			continue
		}
		switch d := p.due(); {
		case p.expired:
		case d <= st.since():
			p.expired = true
			go p.expire()
		case next == 0 || d < next:
			next = d
		}
	}
	if next != 0 {
		f.arm(st, next)
	}
}

// abort cancels the context of every running call, with the turn's
// cause, and starts its watchdog. The calls' contexts are no children of
// the turn's (lazyCancel): this is how the turn's end reaches them.
func (f *inflight) abort() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aborted, f.escaped = true, true
	for _, p := range f.st.ps {
		if !p.running {
			continue
		}
		p.cell.cancel.with(context.Cause(p.st.ctx))
		go p.watchdog()
	}
}

// stop takes the step's deadline out of its queue q (its Dispatcher's)
// once the step is over. A deadline that came and whose expire has yet to run leaves the
// step escaped.
func (f *inflight) stop(q *progressQueue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	if f.armed && !q.dropDeadline(&f.dl) {
		f.escaped = true
	}
	f.armed = false
}

// escape marks the step as looked at from outside its calls.
func (f *inflight) escape() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.escaped = true
}

func (f *inflight) isEscaped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.escaped
}

// reset readies a stopped step's inflight for the next step; its
// deadline stays, out of the queue.
func (f *inflight) reset() {
	f.aborted, f.stopped, f.next = false, false, 0
}

// returnGrace is how long a tool has to return once its context ended. A
// tool that honours its context returns within it, and its answer (often
// the partial output of the work it stopped) is kept.
const returnGrace = time.Second

// expire ends the call's time: its context is cancelled with the timeout
// cause, and the watchdog gives the tool returnGrace to return.
func (p *pending) expire() {
	p.cell.cancel.with(tools.ErrTimedOut)
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
	p.st.d.logger().Warn("tool did not return after its context ended; its result will be dropped",
		"tool", p.call.Name, "call_id", p.call.CallID, "cause", context.Cause(p.cell))
	p.finish(tool.Result{}, p.cell.Err())
}

// lazyCancel is the cancellation of a call's context, made only when
// something looks at it: a context.WithCancelCause per call is two
// allocations, paid by the many tools that never read their context.
// Until it is made, a cancel is only recorded (the context is made
// cancelled with that cause), and values other than
// the context package's own (an *int key) come from the parent, as they
// would through the made context. Made, it is that context: Done, Err,
// Cause, and the children a tool derives from it (context.WithCancel
// finds it as their parent, no goroutine needed) behave as with
// context.WithCancelCause.
//
// Made, the context is behind a pointer, and so is a cancel recorded
// before it was made (state): in every call's cell the two cost 8 bytes,
// where a made context's pointer and a recorded cause (an interface) took
// 24, and the cells of a step are what a no-op step allocates.
//
// The made context is no child of the parent's cancellation (a child is
// an entry in the turn context's map of children, which a step in flight
// keeps): the step's abort (inflight.abort) cancels the contexts of its
// running calls instead, and one made after the parent ended is made
// cancelled.
type lazyCancel struct {
	parent context.Context
	mu     sync.Mutex
	// state is nil until the context is made or cancelled: then the made
	// context (its ctx set), or the cancel recorded before it was made (a
	// madeCancel with its cause alone: cancelledUnmade, timedOutUnmade or
	// parentEnded, which are never written; any other cause in one of its
	// own). Set under mu; made once, never after.
	state atomic.Pointer[madeCancel]
}

// madeCancel is a made lazyCancel's context, or, with ctx nil, the cause of
// a cancel before it was made.
type madeCancel struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	cause  error
}

// The causes of most cancels recorded before a context was made, shared:
// a call's end (settle) records one for every call that ran.
var (
	cancelledUnmade = &madeCancel{cause: context.Canceled}
	timedOutUnmade  = &madeCancel{cause: tools.ErrTimedOut}
	// parentEnded is a cancel recorded after the parent ended: its cause
	// is the parent's, which no longer changes.
	parentEnded = new(madeCancel)
)

// made is the made context's state, or nil.
func (c *lazyCancel) made() *madeCancel {
	if m := c.state.Load(); m != nil && m.ctx != nil {
		return m
	}
	return nil
}

func (c *lazyCancel) ctx() context.Context {
	if m := c.made(); m != nil {
		return m.ctx
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state.Load()
	if s != nil && s.ctx != nil {
		return s.ctx
	}
	m := new(madeCancel)
	m.ctx, m.cancel = context.WithCancelCause((*lazyParent)(c))
	switch {
	case s == parentEnded:
		m.cancel(context.Cause(c.parent))
	case s != nil:
		// Cancelled before it was made: with the first cause, even if the
		// parent has ended since.
		m.cancel(s.cause)
	case c.parent.Err() != nil:
		m.cancel(context.Cause(c.parent))
	}
	c.state.Store(m)
	return m.ctx
}

// lazyParent is a lazyCancel's parent without its cancellation, as
// detached, in the lazyCancel itself: the parent of its made context.
type lazyParent lazyCancel

func (p *lazyParent) Deadline() (time.Time, bool) { return p.parent.Deadline() }
func (*lazyParent) Done() <-chan struct{}         { return nil }
func (*lazyParent) Err() error                    { return nil }
func (p *lazyParent) Value(key any) any           { return p.parent.Value(key) }

// with cancels the context with cause (nil: context.Canceled); the first
// cause stays.
func (c *lazyCancel) with(cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state.Load()
	if s != nil {
		if s.ctx != nil {
			s.cancel(cause)
		}
		return
	}
	switch {
	case c.parent.Err() != nil: // the parent ended first: its cause stays
		s = parentEnded
	case cause == nil || cause == context.Canceled:
		s = cancelledUnmade
	case cause == tools.ErrTimedOut:
		s = timedOutUnmade
	default:
		s = &madeCancel{cause: cause}
	}
	c.state.Store(s)
}

func (c *lazyCancel) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *lazyCancel) Done() <-chan struct{}       { return c.ctx().Done() }

// Err does not make the context: a step's context is the parent of its
// calls' (lazyCancel), whose making reads their parent's Err, and a step
// in flight whose calls wait on their contexts then kept its own made
// for nothing. Unmade, it is cancelled once it was, or once its parent
// ended (it would be made cancelled).
func (c *lazyCancel) Err() error {
	s := c.state.Load()
	switch {
	case s != nil && s.ctx != nil:
		return s.ctx.Err()
	case s != nil || c.parent.Err() != nil:
		return context.Canceled
	}
	return nil
}

func (c *lazyCancel) Value(key any) any {
	if _, own := key.(*int); own { // the context package's cancelCtxKey
		return c.ctx().Value(key)
	}
	return c.parent.Value(key)
}
