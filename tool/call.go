package tool

import (
	"context"

	"github.com/agentbull/toolruntime/protocol"
)

// Call identifies the call a tool is executing, for tools that keep state
// per agent or per turn (homes, todo lists, workflows).
type Call struct {
	AgentID string
	TurnID  string
	Step    int64
	CallID  string
}

// Ref is the call's reference as records store it ("created_by").
func (c Call) Ref() protocol.CallRef {
	return protocol.CallRef{TurnID: c.TurnID, Step: c.Step, CallID: c.CallID}
}

// CallContext is the context a worker runs a call in: its parent with the
// call's identity, which [CallFrom] returns, and a progress receiver,
// which [ReportProgress] reaches. A tool reads them through those two; the
// worker keeps one in the record of every call, so that giving a tool its
// call costs no allocation of its own.
type CallContext struct {
	context.Context
	// Call is the call's identity; one without a CallID leaves the
	// parent's in force.
	Call Call
	// Progress, when set, receives the call's progress reports.
	Progress func(done, total int64, label string)
}

type (
	callKey     struct{}
	progressKey struct{}
)

// Value returns the call for CallFrom and Progress for ReportProgress,
// and asks the parent for anything else.
func (c *CallContext) Value(key any) any {
	switch key.(type) {
	case callKey:
		if c.Call.CallID != "" {
			return c.Call
		}
	case progressKey:
		if c.Progress != nil {
			return c.Progress
		}
	}
	return c.Context.Value(key)
}

// CallFrom returns the identity of the call ctx runs; ok is false outside
// a call.
func CallFrom(ctx context.Context) (c Call, ok bool) {
	c, ok = ctx.Value(callKey{}).(Call)
	return c, ok
}
