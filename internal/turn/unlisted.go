package turn

import (
	"context"

	"github.com/agentbull/toolruntime/tool"
)

// Unlisted is a source of tools whose names a turn's catalog could not
// list: an MCP server that needs an account connected before it lists
// anything still answers a call of a name in its namespace, with the
// reason the call cannot run. Unlisted returns the tool that stands for
// namespace.name, or nil when the name is not the source's: the call
// then ends unknown_tool.
type Unlisted interface {
	Unlisted(ctx context.Context, namespace, name string) *tool.Tool
}

// AddUnlisted, from a category's Tools function called by Assemble, adds
// u to the turn's set: a call of a name the set does not hold is offered
// to it (and to the others added, in order). Elsewhere it does nothing.
func AddUnlisted(ctx context.Context, u Unlisted) {
	if as, ok := ctx.Value(assemblyKey{}).(*assembly); ok {
		as.unlisted = append(as.unlisted, u)
	}
}

// lookupUnlisted asks the set's Unlisted sources for a tool the set does
// not hold. A tool of another name or namespace, one not made by
// tool.New, or a panic counts as none: a source cannot rename a call.
func (s *Set) lookupUnlisted(ctx context.Context, namespace, name string) (t *tool.Tool) {
	if len(s.unlisted) == 0 {
		return nil
	}
	defer func() {
		if recover() != nil {
			t = nil
		}
	}()
	for _, u := range s.unlisted {
		t = u.Unlisted(ctx, namespace, name)
		if t != nil && t.Definition() != nil && t.Name() == name && t.Spec().Namespace == namespace {
			return t
		}
	}
	return nil
}
