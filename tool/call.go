package tool

import (
	"context"

	"github.com/agentbull/toolruntime/internal/toolhooks"
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

// CallFrom returns the identity of the call ctx runs; ok is false outside
// a call.
func CallFrom(ctx context.Context) (c Call, ok bool) {
	c, ok = ctx.Value(toolhooks.CallKey{}).(Call)
	return c, ok
}
