package turn

import (
	"context"
	"time"

	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// cell is the part of a call's state that outlives its step: the
// outcome the caller keeps, and the context the tool ran in, which a tool
// may keep too (a goroutine it left behind still finds it cancelled, and
// its progress reports dropped). A step's cells are one allocation, made
// only for the calls that run. Its size is what a step allocates, and so
// how often the collector runs: the output item is an allocation of its
// own, exactly its size (a 160-byte buffer for short items here cost more
// than the allocation it saved).
//
// The cell is itself the call's context, as tools.CallContext is: the
// call's identity for tool.CallFrom, its progress receiver for
// tool.ReportProgress and its deadline, over the call's lazy cancel. Being
// the cell, it finds what it needs where the cell has it already: its call
// id is the outcome's CallID (set as the call starts, not as it ends), the
// identity the step's calls share and the step's start are in the step's
// stepOut, its deadline an 8-byte duration from that start. 216 bytes,
// the outcome's rare fields behind one pointer (OutcomeMore): 304 with
// them inline, 344 with a context of its own in the cell (an id, a
// time.Time and a pointer to its cancel). A step's eight cells and its
// stepOut fit the 2,048-byte size class, not the 2,688-byte one
// (TestCellSizes), and what a no-op step allocates paces the collector.
type cell struct {
	out    Outcome
	cancel lazyCancel // the context's cancellation
	// step is the step's shared part: the calls' identity and the start
	// their deadlines count from.
	step *stepOut
	// reporter, when set, receives the call's progress reports; it holds
	// their state (one pointer where the func and the state took two).
	reporter *progressTo
	// due is when the call's time is up, after the step's start (0: not
	// set): the context reports it as its deadline. The step's timer
	// cancels the call with cause tools.ErrTimedOut when it passes, and
	// Err then reports context.DeadlineExceeded.
	due time.Duration
}

// Deadline is the call's due time when it is set, otherwise the parent's.
func (c *cell) Deadline() (time.Time, bool) {
	if c.due == 0 {
		return c.cancel.Deadline()
	}
	return c.step.start.Add(c.due), true
}

func (c *cell) Done() <-chan struct{} { return c.cancel.Done() }

// Err is context.DeadlineExceeded once the call's time is up, otherwise
// the parent's.
func (c *cell) Err() error {
	if c.due != 0 && context.Cause(&c.cancel) == tools.ErrTimedOut {
		return context.DeadlineExceeded
	}
	return c.cancel.Err()
}

// Value returns the call for tool.CallFrom and the progress receiver for
// tool.ReportProgress, and asks the parent for anything else.
func (c *cell) Value(key any) any {
	switch key.(type) {
	case toolhooks.CallKey:
		if c.out.CallID != "" {
			var call tool.Call
			if c.step != nil {
				call = c.step.call
			}
			call.CallID = c.out.CallID
			return call
		}
	case toolhooks.ProgressKey:
		if c.reporter != nil {
			return c.reporter.fn
		}
	}
	return c.cancel.Value(key)
}
