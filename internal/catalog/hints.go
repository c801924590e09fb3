package catalog

import (
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// Hints are the flags of a turn's tools for its catalog reply, by the
// name the approval list uses; nil when no tool has a flag.
func Hints(set *turn.Set) map[string]protocol.ToolHints {
	var out map[string]protocol.ToolHints
	for _, t := range set.Tools() {
		sp := t.Spec()
		if !sp.ReadOnly && !sp.Destructive {
			continue
		}
		if out == nil {
			out = map[string]protocol.ToolHints{}
		}
		out[turn.ToolKey(sp.Namespace, sp.Name)] = protocol.ToolHints{ReadOnly: sp.ReadOnly, Destructive: sp.Destructive}
	}
	return out
}
