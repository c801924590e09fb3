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
	// FairKey is the key of the fairness share the call's step draws
	// from (protocol 1.2): the step's context.fairness.key, or its agent.
	// Tools that keep credentials per tenant key them by it.
	FairKey string
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
