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

// AgentCallFrom returns the identity of the call ctx runs, or an
// Internal error when ctx runs no call or its call names no valid agent:
// the first check of a tool that keeps state per agent.
func AgentCallFrom(ctx context.Context) (Call, error) {
	c, ok := CallFrom(ctx)
	if !ok || !protocol.ValidID(c.AgentID) {
		return c, Errorf(Internal, "the call carries no agent identity")
	}
	return c, nil
}
