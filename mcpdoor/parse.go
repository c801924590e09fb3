package mcpdoor

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/protocol"
)

// mcpName is what the SDK accepts as a tool name.
var mcpName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// parseCatalog reads a Responses API tool list (turn.tools) into MCP
// tools: functions by name, a namespace's functions as "ns.name", in the
// catalog's order (the SDK lists them sorted by name). A deferred tool
// comes without its parameters: it is listed with an open object schema
// and _meta MetaDeferred, and the catalog's tool_search entry becomes the
// MCP tool ToolSearchName, which answers with the full definitions. A
// deferred tool called by name is loaded first (see loadDeferred).
// Anything that is not a function with an object schema is left out;
// skipped names it.
func parseCatalog(raw json.RawMessage, hints map[string]protocol.ToolHints) (tools []catalogTool, skipped []string, err error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, nil, fmt.Errorf("catalog: %w", err)
	}
	seen := map[string]bool{}
	add := func(ns string, b json.RawMessage) error {
		var e catalogEntryJSON
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("catalog entry: %w", err)
		}
		name := e.Name
		if ns != "" {
			name = ns + "." + e.Name
		}
		switch {
		case e.Type != "function":
			skipped = append(skipped, name+" ("+e.Type+")")
			return nil
		case !mcpName.MatchString(name) || seen[name]:
			skipped = append(skipped, name+" (name)")
			return nil
		case e.DeferLoading:
			seen[name] = true
			desc := e.Description
			if desc == "" {
				desc = "A deferred tool"
				if ns != "" {
					desc += " of " + ns
				}
				desc += "."
			}
			desc += " Its parameters are loaded on demand: " + ToolSearchName + " answers with its full definition."
			t := &mcp.Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`), Annotations: annotations(hints[name]),
				Meta: mcp.Meta{MetaDeferred: true}}
			tools = append(tools, catalogTool{name: name, namespace: ns, call: e.Name, tool: t})
			return nil
		case !objectSchema(e.Parameters):
			skipped = append(skipped, name+" (schema)")
			return nil
		}
		seen[name] = true
		t := &mcp.Tool{Name: name, Description: e.Description, InputSchema: e.Parameters, Annotations: annotations(hints[name])}
		tools = append(tools, catalogTool{name: name, namespace: ns, call: e.Name, tool: t})
		return nil
	}
	for _, b := range entries {
		var head struct {
			Type  string            `json:"type"`
			Name  string            `json:"name"`
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return nil, nil, fmt.Errorf("catalog entry: %w", err)
		}
		switch head.Type {
		case "namespace":
			for _, tb := range head.Tools {
				if err := add(head.Name, tb); err != nil {
					return nil, nil, err
				}
			}
		case "tool_search":
			if seen[ToolSearchName] {
				skipped = append(skipped, ToolSearchName+" (name)")
				continue
			}
			seen[ToolSearchName] = true
			t := &mcp.Tool{Name: ToolSearchName, InputSchema: json.RawMessage(toolSearchSchema), Annotations: annotations(protocol.ToolHints{ReadOnly: true}),
				Description: "Search the deferred tools by what you need to do; answers with the full definitions (name, description, parameters) of the best matches, which can then be called by name."}
			tools = append(tools, catalogTool{name: ToolSearchName, tool: t})
		default:
			if err := add("", b); err != nil {
				return nil, nil, err
			}
		}
	}
	return tools, skipped, nil
}

// ToolSearchName is the MCP tool that searches a principal's deferred
// tools; MetaDeferred marks, in a tool's _meta in tools/list, a deferred
// tool, whose listed schema is open until tool search shows its own.
const (
	ToolSearchName = "tool_search"
	MetaDeferred   = "io.agentbull.toolruntime/deferred"
)

const toolSearchSchema = `{"type":"object","properties":{"query":{"type":"string","description":"What you need a tool for."}},"required":["query"],"additionalProperties":false}`

// objectSchema reports whether a schema is a JSON object of type
// "object", which is what MCP requires of an input schema.
func objectSchema(b json.RawMessage) bool {
	var m struct {
		Type any `json:"type"`
	}
	if len(b) == 0 || json.Unmarshal(b, &m) != nil {
		return false
	}
	return m.Type == "object"
}

// annotations are MCP's hints from the tool's flags: a read-only tool is
// idempotent and not destructive; a tool with neither flag changes
// things without destroying them, as MCP's defaults would not say
// (destructiveHint defaults to true).
func annotations(h protocol.ToolHints) *mcp.ToolAnnotations {
	destructive := h.Destructive && !h.ReadOnly
	return &mcp.ToolAnnotations{ReadOnlyHint: h.ReadOnly, IdempotentHint: h.ReadOnly, DestructiveHint: &destructive}
}
