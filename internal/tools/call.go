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

// WithCall returns ctx carrying c; the dispatcher sets it for every call.
func WithCall(ctx context.Context, c Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the call ctx carries.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callKey{}).(Call)
	return c, ok
}
