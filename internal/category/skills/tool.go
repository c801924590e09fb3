package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// ToolName is the tool that projects a turn's skills into its catalog.
const ToolName = "read_skill"

// ReadParams are read_skill's parameters.
type ReadParams struct {
	Name string `json:"name"`
}

// maxCachedTools bounds the read_skill tools kept, one per distinct set
// of enabled skills; past it the cache starts again.
const maxCachedTools = 1024

// Category returns the category "skills": for a main turn whose context
// names skills the library has, one read-only tool, read_skill, whose
// description lists each enabled skill's name and description and which
// returns a skill's full instructions. Skills the library does not have
// give notes (turn.Note).
func Category(lib *Library) tool.Category {
	return tool.Category{Name: "skills", Tools: func(ctx context.Context, _ tool.Turn) ([]*tool.Tool, error) {
		names := turn.TurnContext(ctx).Skills
		if len(names) == 0 {
			return nil, nil
		}
		enabled, notes := lib.enabled(names)
		turn.Note(ctx, notes...)
		if len(enabled) == 0 {
			return nil, nil
		}
		t, err := lib.readTool(enabled)
		if err != nil {
			return nil, err
		}
		return []*tool.Tool{t}, nil
	}}
}

// readTool returns the read_skill tool for one set of enabled skills,
// built once: its description and the enum of its parameter depend on
// the set.
func (l *Library) readTool(enabled []*Skill) (*tool.Tool, error) {
	names := make([]string, len(enabled))
	for i, s := range enabled {
		names[i] = s.Name
	}
	key := strings.Join(names, "\x00")
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.tools[key]; ok {
		return t, nil
	}
	var desc strings.Builder
	desc.WriteString("Read the full instructions of a skill. Skills are know-how for particular tasks: before doing a task that a skill below covers, read that skill and follow it.\n\nSkills:")
	for _, s := range enabled {
		fmt.Fprintf(&desc, "\n- %s: %s", s.Name, s.Description)
	}
	schema, err := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "enum": names, "description": "The skill to read."},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	})
	if err != nil {
		return nil, err
	}
	t, err := tool.New(tool.Def[ReadParams]{
		Spec: tool.Spec{Name: ToolName, Description: desc.String(), JSONSchema: schema, ReadOnly: true, Strict: true},
		Activity: func(p ReadParams) string {
			return "Reading the skill " + p.Name
		},
		Execute: func(_ context.Context, p ReadParams) (tool.Result, error) {
			s, ok := l.Get(p.Name)
			if !ok { // the schema's enum holds only skills the library has
				return tool.Result{}, tool.Errorf(tool.InvalidArguments, "There is no skill %q.", p.Name)
			}
			return tool.Result{
				Content: s.Body,
				Details: map[string]any{"skill": s.Name, "path": s.Path, "mcp_servers": s.MCPServers},
			}, nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("skills: %w", err)
	}
	if len(l.tools) >= maxCachedTools {
		clear(l.tools)
	}
	l.tools[key] = t
	return t, nil
}
