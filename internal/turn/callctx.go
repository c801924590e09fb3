package turn

import (
	"context"
	"time"

	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// callCtx is the context a call runs in, as tools.CallContext is: the
// call's identity for tool.CallFrom, its progress receiver for
// tool.ReportProgress and its deadline, over the call's lazy cancel. The
// parent is that *lazyCancel, where tools.CallContext holds an interface:
// 8 bytes less in every call's cell, which puts a step's eight cells and
// its stepOut (3,008 bytes and the allocation's 8-byte header) in the
// 3,072-byte size class, not the 3,200-byte one. What a no-op step
// allocates is what paces the collector.
type callCtx struct {
	cancel *lazyCancel
	// Step and CallID are the call's identity: Step the part the calls
	// of one step share (its CallID unused).
	Step   *tool.Call
	CallID string
	// Progress, when set, receives the call's progress reports.
	Progress func(done, total int64, label string)
	// Due is when the call's time is up: the context reports it as its
	// deadline. The step's timer cancels the call with cause
	// tools.ErrTimedOut when it passes, and Err then reports
	// context.DeadlineExceeded.
	Due time.Time
}

// Deadline is Due when it is set, otherwise the parent's.
func (c *callCtx) Deadline() (time.Time, bool) {
	if c.Due.IsZero() {
		return c.cancel.Deadline()
	}
	return c.Due, true
}

func (c *callCtx) Done() <-chan struct{} { return c.cancel.Done() }

// Err is context.DeadlineExceeded once the call's time is up, otherwise
// the parent's.
func (c *callCtx) Err() error {
	if !c.Due.IsZero() && context.Cause(c.cancel) == tools.ErrTimedOut {
		return context.DeadlineExceeded
	}
	return c.cancel.Err()
}

// Value returns the call for tool.CallFrom and Progress for
// tool.ReportProgress, and asks the parent for anything else.
func (c *callCtx) Value(key any) any {
	switch key.(type) {
	case toolhooks.CallKey:
		if c.CallID != "" {
			var call tool.Call
			if c.Step != nil {
				call = *c.Step
			}
			call.CallID = c.CallID
			return call
		}
	case toolhooks.ProgressKey:
		if c.Progress != nil {
			return c.Progress
		}
	}
	return c.cancel.Value(key)
}
