package tools

import (
	"context"
	"errors"
	"time"

	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/tool"
)

// ErrTimedOut is the cause a call's context is cancelled with when the
// call's time is up (CallContext.Due).
var ErrTimedOut = errors.New("call timed out")

// CallContext is the context a call runs in: its parent with the call's
// identity, which tool.CallFrom returns, a progress receiver, which
// tool.ReportProgress reaches, and the call's deadline. A dispatcher keeps
// one in the record of every call, so that giving a tool its call costs
// no allocation of its own.
type CallContext struct {
	context.Context
	// Step and CallID are the call's identity (tool.CallFrom): Step the
	// part the calls of one step share (its CallID unused), so that a
	// dispatcher keeps it once per step, not in every call's record (a
	// step's records are most of what it allocates). One without a
	// CallID leaves the parent's in force.
	Step   *tool.Call
	CallID string
	// Progress, when set, receives the call's progress reports: done so
	// far, total when known (0: unknown), and a short label (may be
	// empty).
	Progress func(done, total int64, label string)
	// Due, when set, is when the call's time is up: the context reports
	// it as its deadline, as a context with a timeout would (so that tools
	// pass it on to HTTP clients and MCP sessions). Whoever keeps the
	// time cancels the parent with cause ErrTimedOut when it passes, and
	// Err then reports context.DeadlineExceeded.
	Due time.Time
}

// Value returns the call for tool.CallFrom and Progress for
// tool.ReportProgress, and asks the parent for anything else.
func (c *CallContext) Value(key any) any {
	switch key.(type) {
	case toolhooks.CallKey:
		if c.CallID != "" {
			return c.call()
		}
	case toolhooks.ProgressKey:
		if c.Progress != nil {
			return c.Progress
		}
	}
	return c.Context.Value(key)
}

// call is the call's identity.
func (c *CallContext) call() tool.Call {
	var call tool.Call
	if c.Step != nil {
		call = *c.Step
	}
	call.CallID = c.CallID
	return call
}

// Deadline is Due when it is set, otherwise the parent's.
func (c *CallContext) Deadline() (time.Time, bool) {
	if c.Due.IsZero() {
		return c.Context.Deadline()
	}
	return c.Due, true
}

// Err is context.DeadlineExceeded once the call's time is up, otherwise
// the parent's.
func (c *CallContext) Err() error {
	if !c.Due.IsZero() && context.Cause(c.Context) == ErrTimedOut {
		return context.DeadlineExceeded
	}
	return c.Context.Err()
}

// WithCall returns ctx carrying c, for tool.CallFrom.
func WithCall(ctx context.Context, c tool.Call) context.Context {
	return &CallContext{Context: ctx, Step: &c, CallID: c.CallID}
}

// WithProgress returns ctx whose calls to tool.ReportProgress reach f. The
// dispatcher sets it; it rate-limits what it publishes.
func WithProgress(ctx context.Context, f func(done, total int64, label string)) context.Context {
	return &CallContext{Context: ctx, Progress: f}
}
