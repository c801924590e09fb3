package turn

import (
	"container/heap"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// ProgressInterval is the least time between two progress events of one
// call: at most four a second, however often the tool reports.
const ProgressInterval = 250 * time.Millisecond

// MaxProgressLabel bounds the label of a progress event, in bytes; a
// longer one is cut at a character boundary and ends with "…".
const MaxProgressLabel = 200

// progress is one call's progress reporter (the func withProgress puts
// in the call's context, reached through tool.ReportProgress): it keeps
// the latest report and has it published when it is due (through the
// Dispatcher's progressQueue), so a report costs a lock and a few
// stores, and never waits for the network. A publish is queued on a report
// when none is, and again only while reports keep
// coming: the last report before a pause goes out at most one interval
// after it (a trailing publish), unless the call ends first. It is made
// on the call's first report: a call that never reports costs its cell 16
// bytes and two small allocations (where its reports go, and the report
// func). None reaches the call's record, which the next step may reuse: a
// tool that reports after its call ended finds the reporter ended.
type progress struct {
	to *progressTo

	mu          sync.Mutex
	done, total int64
	text        string
	dirty       bool // a report not yet published
	armed       bool // a publish is queued or under way
	ended       bool // the call ended: nothing more goes out
	published   bool // last is set
	// Times on the queue's clock (progressQueue.clock): 8 bytes each where
	// a time.Time is 24, which takes the reporter of every reporting call
	// in flight from 112 bytes to 80.
	last time.Duration // when the last publish began
	at   time.Duration // when its publish is due in progressQueue.later, guarded by its mu

	// pub is held while an event is published, so that endProgress can
	// wait for one under way: the call's completed event comes after it.
	pub sync.Mutex
}

// progressTo is where a call's progress goes: Hooks.Progress, with what
// its events say of the call. Calls in flight by the thousand each keep
// one, and a reporting call's progress points to it: the call's identity
// is read from its cell (the call's context) rather than copied here.
type progressTo struct {
	c *cell
	// fn is report, the func tool.ReportProgress finds in the context,
	// and state what the call's reports left.
	fn      func(done, total int64, label string)
	state   progressState
	publish func(JournalRef, protocol.Activity)
	obs     *stepObserver // in place of publish (stepState.obs)
	name    string        // the call's tool
	label   string        // its started activity label
	digest  string        // the call's JournalRef.Digest
	queue   *progressQueue
}

// ref is the call's JournalRef.
func (to *progressTo) ref() JournalRef {
	c := &to.c.step.call
	return JournalRef{AgentID: c.AgentID, TurnID: c.TurnID, Step: c.Step, CallID: to.c.out.CallID, Digest: to.digest}
}

// report is the call's progress func.
func (to *progressTo) report(done, total int64, label string) {
	to.state.report(to, done, total, label)
}

// progressQueue publishes the reports that are due, in the order they
// came due, on at most maxProgressPublishers goroutines of its own, each
// started when a report is due and none is free, and ended when nothing
// is left to publish. With a goroutine per publish, a connection that
// fell behind (thousands of calls reporting at once) held a goroutine, its
// stack and an encoded event per reporting call; queued, a call waits
// as a pointer, and its latest report goes out when its turn comes.
//
// A publish that is not due yet waits in later, by time, under the
// queue's one timer: a timer per reporting call, whose firing started a
// goroutine, is what a call in flight kept and what thousands of calls
// reporting at once started.
//
// The same timer keeps the running steps' next deadlines (steps, of
// inflight): a timer per step was an eighth of a KiB of every step in
// flight.
type progressQueue struct {
	mu      sync.Mutex
	due     []*progress
	running int
	later   progressHeap
	steps   deadlineHeap
	timer   *time.Timer // fires at timerAt, when later or steps is not empty
	timerAt time.Time

	// epoch is where the clock starts: the queue's first reading.
	epoch     time.Time
	epochOnce sync.Once
}

// clock reads the queue's clock: the monotonic time since its epoch.
func (q *progressQueue) clock() time.Duration { return q.on(time.Now()) }

// on is t on the queue's clock.
func (q *progressQueue) on(t time.Time) time.Duration {
	q.epochOnce.Do(func() { q.epoch = time.Now() })
	return t.Sub(q.epoch)
}

// wall is a reading of the queue's clock as a time.
func (q *progressQueue) wall(d time.Duration) time.Time { return q.epoch.Add(d) }

// deadline is a step's place in its Dispatcher's queue of deadlines
// (progressQueue.steps), in the step's state: its next deadline is when
// the queue calls its inflight's expire.
type deadline struct {
	owner *inflight // its queue is its step's Dispatcher's progress
	// at is on q's clock: 8 bytes where a time.Time is 24, which takes a
	// step's state (stepState, with its inflight) a size class down.
	at  time.Duration // guarded by q.mu
	pos int           // its index in q.steps plus one; 0: not queued; guarded by q.mu
}

// deadlineHeap is a min-heap of deadlines by when they are due.
type deadlineHeap []*deadline

func (h deadlineHeap) Len() int           { return len(h) }
func (h deadlineHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h deadlineHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].pos, h[j].pos = i+1, j+1
}
func (h *deadlineHeap) Push(x any) {
	d := x.(*deadline)
	d.pos = len(*h) + 1
	*h = append(*h, d)
}
func (h *deadlineHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	d.pos = 0
	return d
}

// setDeadline queues d for at, or moves it there.
func (q *progressQueue) setDeadline(d *deadline, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d.at = q.on(at)
	if d.pos > 0 {
		heap.Fix(&q.steps, d.pos-1)
	} else {
		heap.Push(&q.steps, d)
	}
	if q.timerAt.IsZero() || at.Before(q.timerAt) {
		q.arm(at)
	}
}

// dropDeadline takes d out of the queue, and reports false when it was
// not in it: it came due, and its expire is called or about to be.
func (q *progressQueue) dropDeadline(d *deadline) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if d.pos == 0 {
		return false
	}
	heap.Remove(&q.steps, d.pos-1)
	return true
}

// progressHeap is a min-heap of publishes by when they are due.
type progressHeap []*progress

func (h progressHeap) Len() int           { return len(h) }
func (h progressHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h progressHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *progressHeap) Push(x any)        { *h = append(*h, x.(*progress)) }
func (h *progressHeap) Pop() any {
	old := *h
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return g
}

// after queues g's publish for at.
func (q *progressQueue) after(g *progress, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	g.at = q.on(at)
	heap.Push(&q.later, g)
	if q.timerAt.IsZero() || at.Before(q.timerAt) {
		q.arm(at)
	}
}

// arm sets the timer for at. The caller holds mu.
func (q *progressQueue) arm(at time.Time) {
	q.timerAt = at
	if q.timer == nil {
		q.timer = time.AfterFunc(time.Until(at), q.fire)
		return
	}
	q.timer.Reset(time.Until(at))
}

// fire moves the publishes that are due to the queue, and expires the
// steps whose deadline came. A fire that finds none due (a timer re-armed
// while its func was starting) only re-arms.
func (q *progressQueue) fire() {
	q.mu.Lock()
	now := q.clock()
	q.timerAt = time.Time{}
	for len(q.later) > 0 && q.later[0].at <= now {
		q.due = append(q.due, heap.Pop(&q.later).(*progress))
	}
	var expired []*inflight
	for len(q.steps) > 0 && q.steps[0].at <= now {
		expired = append(expired, heap.Pop(&q.steps).(*deadline).owner)
	}
	var next time.Duration
	queued := len(q.later) > 0
	if queued {
		next = q.later[0].at
	}
	if len(q.steps) > 0 && (!queued || q.steps[0].at < next) {
		next, queued = q.steps[0].at, true
	}
	if queued {
		q.arm(q.wall(next))
	}
	start := min(len(q.due), maxProgressPublishers-q.running)
	q.running += max(start, 0)
	q.mu.Unlock()
	for range start {
		go q.drain()
	}
	for _, f := range expired {
		f.expire()
	}
}

// maxProgressPublishers bounds the goroutines publishing progress at once
// for one Dispatcher: the events go out on one connection in the worker,
// whose writes take turns anyway.
const maxProgressPublishers = 4

// push queues g, which is armed and so is in the queue at most once.
func (q *progressQueue) push(g *progress) {
	q.mu.Lock()
	q.due = append(q.due, g)
	start := q.running < maxProgressPublishers
	if start {
		q.running++
	}
	q.mu.Unlock()
	if start {
		go q.drain()
	}
}

// drain publishes what is due until nothing is.
func (q *progressQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.due) == 0 {
			q.due = nil // the array a burst grew goes with it
			q.running--
			q.mu.Unlock()
			return
		}
		g := q.due[0]
		q.due[0] = nil
		q.due = q.due[1:]
		q.mu.Unlock()
		g.publish()
	}
}

// progressState is what a call's reporter holds of its reports.
//
// p is made on the first report; endProgress swaps it for endedProgress,
// so that a report from then on sees the call ended without a flag of its
// own. It is in the reporter, made only for a step whose hooks publish
// progress, not in every call's cell.
type progressState struct {
	p atomic.Pointer[progress]
}

// endedProgress is progressState.p once the call ended: a mark, never
// locked nor written.
var endedProgress = new(progress)

// report keeps the call's latest report, and queues its publish when none
// is.
func (s *progressState) report(to *progressTo, done, total int64, label string) {
	g := s.p.Load()
	if g == nil {
		g = &progress{to: to}
		if !s.p.CompareAndSwap(nil, g) {
			g = s.p.Load()
		}
	}
	if g == endedProgress {
		return
	}
	done = max(done, 0)
	if total < done {
		total = 0 // a total below what is done is no total
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// g was in place before endProgress swapped it out, and endProgress
	// sets g.ended under g.mu: one of the two sees the other.
	if g.ended {
		return
	}
	g.done, g.total, g.text, g.dirty = done, total, label, true
	if g.armed {
		return
	}
	g.armed = true
	wait := ProgressInterval - (g.to.queue.clock() - g.last)
	if !g.published || wait < 0 {
		wait = 0
	}
	g.schedule(wait)
}

// schedule queues the publish of the latest report after wait. The
// caller holds mu.
func (g *progress) schedule(wait time.Duration) {
	if wait <= 0 {
		g.to.queue.push(g)
		return
	}
	g.to.queue.after(g, time.Now().Add(wait))
}

// publish publishes the latest report, and re-arms the timer for the
// next interval when more came while it was publishing.
func (g *progress) publish() {
	g.pub.Lock()
	defer g.pub.Unlock()
	g.mu.Lock()
	if g.ended || !g.dirty {
		g.armed = false
		g.mu.Unlock()
		return
	}
	ref := g.to.ref()
	a := protocol.Activity{CallID: ref.CallID, Name: g.to.name, State: protocol.ActivityProgress,
		Label: progressLabel(g.text, g.to.label), Progress: &protocol.Progress{Done: g.done}}
	if g.total > 0 {
		total := g.total
		a.Progress.Total = &total
	}
	g.dirty, g.last, g.published = false, g.to.queue.clock(), true
	g.mu.Unlock()

	if o := g.to.obs; o != nil {
		o.progress(ref, a)
	} else {
		g.to.publish(ref, a)
	}

	g.mu.Lock()
	if g.dirty && !g.ended {
		g.schedule(ProgressInterval - (g.to.queue.clock() - g.last))
	} else {
		g.armed = false
	}
	g.mu.Unlock()
}

// withProgress gives the call a progress reporter when its hooks
// publish progress.
func (p *pending) withProgress() {
	h, o := p.st.hooks, p.st.obs
	var publish func(JournalRef, protocol.Activity)
	switch {
	case o != nil:
	case h != nil && h.Progress != nil:
		publish = h.Progress
	default:
		return
	}
	to := &progressTo{c: p.cell, publish: publish, obs: o, name: p.call.Name, label: p.invocation.Activity, digest: p.digest, queue: &p.st.d.progress}
	to.fn = to.report
	p.cell.reporter = to
}

// endProgress stops the call's reporter when the call ends, before its
// completed event: later reports are dropped, a pending one is not
// published, and one being published is waited for.
func (p *pending) endProgress() {
	to := p.cell.reporter
	if to == nil {
		return
	}
	g := to.state.p.Swap(endedProgress)
	if g == nil || g == endedProgress {
		return // never reported; a report from now on sees ended
	}
	g.mu.Lock()
	g.ended = true
	// A publish still queued finds it ended, and publishes nothing.
	g.mu.Unlock()
	g.pub.Lock()
	//lint:ignore SA2001 the lock only waits for a publish under way
	g.pub.Unlock()
}

// progressLabel is the tool's label, clipped, or the call's started
// label when the tool gave none.
func progressLabel(text, started string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		text = started
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	return textclip.Cut(text, MaxProgressLabel, "…")
}
