package tools

import "context"

// Call identifies the call a tool is executing, for tools that keep state
// per agent or turn (homes, todo lists, workflows).
type Call struct {
	AgentID string
	TurnID  string
	Step    int
	CallID  string
}

type callKey struct{}

// WithCall returns ctx carrying c.
func WithCall(ctx context.Context, c Call) context.Context {
	return &CallContext{Context: ctx, Call: c}
}

// CallContext is a context carrying a Call. The dispatcher keeps one in
// the record of every call, so that giving a tool its call costs no
// allocation of its own.
type CallContext struct {
	context.Context
	Call Call
	// Progress, when set, receives the call's ReportProgress (as
	// WithProgress would, without a context of its own).
	Progress ProgressFunc
}

// Value returns the call for CallFrom, Progress (when set) for
// ReportProgress, and asks the parent for anything else.
func (c *CallContext) Value(key any) any {
	switch key.(type) {
	case callKey:
		return c.Call
	case progressKey:
		if c.Progress != nil {
			return c.Progress
		}
	}
	return c.Context.Value(key)
}

// CallFrom returns the call ctx carries.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}
