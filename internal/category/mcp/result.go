package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// result maps a tool result onto the contract: text content joined for
// the model, images and binary resources as media (the runtime fits them
// to the media budget, and words a note for any it cannot send), links
// described in a line, structured content checked against the tool's
// output schema (out, nil when it declares none) and handed on both as
// details and to the model (as the text when there is none, else after
// it, unless the text already is the same JSON), isError as a tool_error
// whose message is the text. toolName names the tool, for the media's
// source.
func (s *server) result(res *sdk.CallToolResult, toolName string, out *outputSchema) (tool.Result, error) {
	limit := s.m.opts.MaxResultBytes
	text, ms := s.render(res.Content, toolName)
	r := tool.Result{Media: ms}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		switch {
		case err != nil:
			r.Details = map[string]string{"structured_content_error": err.Error()}
		case len(b) > limit:
			r.Details = map[string]any{"structured_content_bytes": len(b), "truncated": true}
		default:
			r.Details = json.RawMessage(b)
		}
		if err == nil && !res.IsError {
			if verr := out.check(b); verr != nil {
				return r, tool.Errorf(tool.ToolError,
					"The MCP server %s ran %s, but its structured result does not match the tool's output schema (%s), so it is not given as the tool's output. Check its effect before calling it again, or do without this tool.",
					s.name, toolName, clip(verr.Error(), 1<<10))
			}
		}
		switch {
		case err != nil:
		case text == "":
			text = string(b)
		case !sameJSON(text, b):
			text += "\n[structured content]\n" + string(b)
		}
	} else if out != nil && !res.IsError {
		return r, tool.Errorf(tool.ToolError,
			"The MCP server %s ran %s, but its result has no structured content although the tool declares an output schema, so its output is incomplete. Check its effect before calling it again, or do without this tool.",
			s.name, toolName)
	}
	text = clip(text, limit)
	if res.IsError {
		if text == "" {
			text = "The tool reported an error without saying what it was."
		}
		return r, tool.Errorf(tool.ToolError, "%s", text)
	}
	r.Content = text
	return r, nil
}

// render joins the text blocks, with a one-line description of each link,
// and returns images, audio and blob resources as media, in order.
func (s *server) render(content []sdk.Content, toolName string) (string, []tool.Media) {
	parts := make([]string, 0, len(content))
	var ms []tool.Media
	from := "the MCP tool " + s.name + "." + toolName
	for _, c := range content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			ms = append(ms, tool.Media{MIMEType: c.MIMEType, Data: c.Data, Source: from})
		case *sdk.AudioContent:
			ms = append(ms, tool.Media{MIMEType: c.MIMEType, Data: c.Data, Source: from})
		case *sdk.ResourceLink:
			parts = append(parts, describeLink(c))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Blob != nil {
				ms = append(ms, tool.Media{MIMEType: r.MIMEType, Data: r.Blob, Filename: r.URI, Source: r.URI + " (a resource of the MCP tool " + s.name + "." + toolName + ")"})
				continue
			}
			parts = append(parts, describeResource(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	return strings.Join(parts, "\n"), ms
}

func describeLink(l *sdk.ResourceLink) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[resource link %s", l.URI)
	if l.Name != "" {
		fmt.Fprintf(&b, " %q", l.Name)
	}
	if l.MIMEType != "" {
		fmt.Fprintf(&b, ", %s", l.MIMEType)
	}
	if l.Size != nil {
		fmt.Fprintf(&b, ", %s", textclip.Size(int(*l.Size)))
	}
	if l.Description != "" {
		fmt.Fprintf(&b, ": %s", l.Description)
	}
	b.WriteString("]")
	return b.String()
}

// describeResource gives an embedded text resource's text under a header
// line (the server embedded it for the model to read).
func describeResource(r *sdk.ResourceContents) string {
	if r == nil {
		return "[empty resource]"
	}
	head := "[resource " + r.URI
	if r.MIMEType != "" {
		head += ", " + r.MIMEType
	}
	return head + "]\n" + r.Text
}

// clip cuts text to limit bytes on a character boundary and says how much
// was left out.
func clip(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	head := textclip.Head(text, limit)
	return head + fmt.Sprintf("\n[… %d more bytes of output left out]", len(text)-len(head))
}
