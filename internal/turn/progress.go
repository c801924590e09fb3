package turn

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/protocol"
)

// ProgressInterval is the least time between two progress events of one
// call: at most four a second, however often the tool reports.
const ProgressInterval = 250 * time.Millisecond

// MaxProgressLabel bounds the label of a progress event, in bytes; a
// longer one is cut at a character boundary and ends with "…".
const MaxProgressLabel = 200

// ProgressObserver is an Observer that also publishes the progress of
// running calls. CallProgress is called on a timer's goroutine, never the
// tool's, at most once per ProgressInterval per call, and never after
// the call's CallEnded began; it may block (a slow connection) without
// slowing the tool, whose reports meanwhile only replace the value
// waiting to go out.
type ProgressObserver interface {
	CallProgress(ref CallRef, a protocol.Activity)
}

// progress is one call's progress reporter (pending.report, reached
// through tools.ReportProgress): it keeps the latest report and publishes
// it from a timer, so a report costs a lock and a few stores, and never
// waits for the network. The timer is created on the first report, and
// re-armed only while reports keep coming: the last report before a pause
// goes out at most one interval after it (a trailing publish), unless the
// call ends first. It lives in the call's pending, so a call that never
// reports costs one small allocation (the report func).
type progress struct {
	obs ProgressObserver // nil: the call has no reporter

	mu          sync.Mutex
	done, total int64
	text        string
	dirty       bool      // a report not yet published
	armed       bool      // the timer is set, or its publish is under way
	ended       bool      // the call ended: nothing more goes out
	last        time.Time // when the last publish began
	timer       *time.Timer

	// pub is held while an event is published, so that endProgress can
	// wait for one under way: the call's completed event comes after it.
	pub sync.Mutex
}

// report is the call's tools.ProgressFunc.
func (p *pending) report(done, total int64, label string) {
	done = max(done, 0)
	if total < done {
		total = 0 // a total below what is done is no total
	}
	g := &p.progress
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return
	}
	g.done, g.total, g.text, g.dirty = done, total, label, true
	if g.armed {
		return
	}
	g.armed = true
	wait := ProgressInterval - time.Since(g.last)
	if g.last.IsZero() || wait < 0 {
		wait = 0
	}
	if g.timer == nil {
		g.timer = time.AfterFunc(wait, p.publishProgress)
	} else {
		g.timer.Reset(wait)
	}
}

// publishProgress publishes the latest report, and re-arms the timer for
// the next interval when more came while it was publishing.
func (p *pending) publishProgress() {
	g := &p.progress
	g.pub.Lock()
	defer g.pub.Unlock()
	g.mu.Lock()
	if g.ended || !g.dirty {
		g.armed = false
		g.mu.Unlock()
		return
	}
	a := protocol.Activity{CallID: p.ref.CallID, Name: p.call.Name, State: protocol.ActivityProgress,
		Label: progressLabel(g.text, p.inv.Activity), Progress: &protocol.Progress{Done: g.done}}
	if g.total > 0 {
		total := g.total
		a.Progress.Total = &total
	}
	g.dirty, g.last = false, time.Now()
	g.mu.Unlock()

	g.obs.CallProgress(p.ref, a)

	g.mu.Lock()
	if g.dirty && !g.ended {
		g.timer.Reset(max(ProgressInterval-time.Since(g.last), 0))
	} else {
		g.armed = false
	}
	g.mu.Unlock()
}

// withProgress gives the call a progress reporter when the observer
// publishes progress.
func (p *pending) withProgress() {
	po, ok := p.d.Observer.(ProgressObserver)
	if !ok {
		return
	}
	p.progress.obs = po
	p.ctx.Progress = p.report
}

// endProgress stops the call's reporter when the call ends, before its
// completed event: later reports are dropped, a pending one is not
// published, and one being published is waited for.
func (p *pending) endProgress() {
	g := &p.progress
	if g.obs == nil {
		return
	}
	g.mu.Lock()
	g.ended = true
	if g.timer != nil {
		g.timer.Stop()
	}
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
	if len(text) <= MaxProgressLabel {
		return text
	}
	const ellipsis = "…"
	cut := MaxProgressLabel - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + ellipsis
}

// CallProgress publishes a progress event, fire-and-forget like the
// other activity events.
func (o *stepObserver) CallProgress(ref CallRef, a protocol.Activity) {
	o.em.Activity(ref.AgentID, ref.TurnID, a)
}
