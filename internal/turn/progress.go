package turn

import (
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/tools"
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

// progress is one call's progress reporter (tools.WithProgress): it keeps
// the latest report and publishes it from a timer, so a report costs a
// lock and a few stores, and never waits for the network. The timer is
// created on the first report, and re-armed only while reports keep
// coming: the last report before a pause goes out at most one interval
// after it (a trailing publish), unless the call ends first.
type progress struct {
	obs   ProgressObserver
	ref   CallRef
	name  string
	label string // the call's started label, for reports without one

	mu          sync.Mutex
	done, total int64
	text        string
	dirty       bool      // a report not yet published
	armed       bool      // the timer is set, or its publish is under way
	ended       bool      // the call ended: nothing more goes out
	last        time.Time // when the last publish began
	timer       *time.Timer

	// pub is held while an event is published, so that end can wait for
	// one under way: the call's completed event is published after it.
	pub sync.Mutex
}

// report is the call's tools.ProgressFunc.
func (p *progress) report(done, total int64, label string) {
	done = max(done, 0)
	if total < done {
		total = 0 // a total below what is done is no total
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	p.done, p.total, p.text, p.dirty = done, total, label, true
	if p.armed {
		return
	}
	p.armed = true
	wait := ProgressInterval - time.Since(p.last)
	if p.last.IsZero() || wait < 0 {
		wait = 0
	}
	if p.timer == nil {
		p.timer = time.AfterFunc(wait, p.fire)
	} else {
		p.timer.Reset(wait)
	}
}

// fire publishes the latest report, and re-arms the timer for the next
// interval when more came while it was publishing.
func (p *progress) fire() {
	p.pub.Lock()
	defer p.pub.Unlock()
	p.mu.Lock()
	if p.ended || !p.dirty {
		p.armed = false
		p.mu.Unlock()
		return
	}
	a := protocol.Activity{CallID: p.ref.CallID, Name: p.name, State: protocol.ActivityProgress,
		Label: progressLabel(p.text, p.label), Progress: &protocol.Progress{Done: p.done}}
	if p.total > 0 {
		total := p.total
		a.Progress.Total = &total
	}
	p.dirty, p.last = false, time.Now()
	p.mu.Unlock()

	p.obs.CallProgress(p.ref, a)

	p.mu.Lock()
	if p.dirty && !p.ended {
		p.timer.Reset(max(ProgressInterval-time.Since(p.last), 0))
	} else {
		p.armed = false
	}
	p.mu.Unlock()
}

// end stops the reporter when the call ends, before its completed event:
// later reports are dropped, a pending one is not published, and one
// being published is waited for.
func (p *progress) end() {
	p.mu.Lock()
	p.ended = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.pub.Lock()
	//lint:ignore SA2001 the lock only waits for a publish under way
	p.pub.Unlock()
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

// withProgress gives the call a progress reporter when the observer
// publishes progress.
func (p *pending) withProgress() {
	po, ok := p.d.Observer.(ProgressObserver)
	if !ok {
		return
	}
	p.progress = &progress{obs: po, ref: p.ref, name: p.call.Name, label: p.inv.Activity}
	p.ctx.Context = tools.WithProgress(p.ctx.Context, p.progress.report)
}

// endProgress ends the call's reporter, if it has one.
func (p *pending) endProgress() {
	if p.progress != nil {
		p.progress.end()
	}
}

// CallProgress publishes a progress event, fire-and-forget like the
// other activity events.
func (o *stepObserver) CallProgress(ref CallRef, a protocol.Activity) {
	o.em.Activity(ref.AgentID, ref.TurnID, a)
}
