package mcp

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// SkillServers names the MCP servers a turn's skills need; those servers
// are enabled for the turn as if its context named them. Package skills
// provides one.
type SkillServers interface {
	ServersFor(skills []string) []string
}

// Category returns the category "mcp" of the MCP servers. For a main
// turn it enables the servers the context names, plus those the turn's
// skills need (skills may be nil), that this worker is configured with,
// and returns their tools in server-name order, each server's in the
// order the server lists them. Servers are asked at once. A server that
// cannot be reached, or a name that is not configured, gives a note
// (turn.Note), never an error. A server that needs the turn's account
// connected and was never listed is offered as ConnectTool alone, and a
// call of any name of it ends auth_required (unlisted.go).
func Category(m *Manager, skills SkillServers) tool.Category {
	return tool.Category{Name: "mcp", Tools: func(ctx context.Context, t tool.Turn) ([]*tool.Tool, error) {
		tc := turn.TurnContext(ctx)
		// Servers with tokens per owner list for the turn's owner.
		ctx = withTurnOwner(ctx, t.AgentID, tc.Fairness.Key)
		names, notes := m.enabled(tc, skills)
		turn.Note(ctx, notes...)
		if len(names) == 0 {
			return nil, nil
		}
		got := make([]listing, len(names))
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Go(func() { got[i] = m.servers[name].listing(ctx) })
		}
		wg.Wait()
		var ts []*tool.Tool
		var unlisted unlistedServers
		for i, l := range got {
			ts = append(ts, l.tools...)
			turn.Note(ctx, l.notes...)
			if l.needsAccount { // unlisted.go
				s := m.servers[names[i]]
				if ct, err := s.connectTool(); err == nil {
					ts = append(ts, ct)
				}
				if unlisted == nil {
					unlisted = unlistedServers{}
				}
				unlisted[s.name] = s
			}
		}
		if unlisted != nil {
			turn.AddUnlisted(ctx, unlisted)
		}
		return ts, nil
	}}
}

// enabled returns the configured servers the turn enables, sorted, and
// notes on names that are not configured.
func (m *Manager) enabled(c protocol.Context, skills SkillServers) ([]string, []string) {
	want := map[string]string{} // server → who asked for it
	for _, name := range c.MCPServers {
		want[name] = "the turn's context"
	}
	if skills != nil && len(c.Skills) > 0 {
		for _, name := range skills.ServersFor(c.Skills) {
			if _, ok := want[name]; !ok {
				want[name] = "a skill of the turn"
			}
		}
	}
	var names, notes []string
	for name, by := range want {
		if _, ok := m.servers[name]; ok {
			names = append(names, name)
		} else {
			notes = append(notes, fmt.Sprintf("mcp server %q, named by %s, is not configured on this worker", name, by))
		}
	}
	slices.Sort(names)
	slices.Sort(notes)
	return names, notes
}
