package mcp

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/tools"
)

// result maps a tool result onto the contract: text content joined for
// the model, other content described in a line, structured content as
// details (and as the text when there is no other content), isError as a
// tool_error whose message is the text.
func (s *server) result(res *sdk.CallToolResult) (tools.Result, error) {
	limit := s.m.opts.MaxResultBytes
	text := render(res.Content)
	var out tools.Result
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		switch {
		case err != nil:
			out.Details = map[string]string{"structured_content_error": err.Error()}
		case len(b) > limit:
			out.Details = map[string]any{"structured_content_bytes": len(b), "truncated": true}
		default:
			out.Details = json.RawMessage(b)
		}
		if text == "" && err == nil {
			text = string(b)
		}
	}
	text = clip(text, limit)
	if res.IsError {
		if text == "" {
			text = "The tool reported an error without saying what it was."
		}
		return out, tools.Errorf(tools.ToolError, "%s", text)
	}
	out.Content = text
	return out, nil
}

// render joins the content blocks: text as it is, everything else as a
// one-line description.
func render(content []sdk.Content) string {
	parts := make([]string, 0, len(content))
	for _, c := range content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %s]", orUnknown(c.MIMEType), size(len(c.Data))))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %s]", orUnknown(c.MIMEType), size(len(c.Data))))
		case *sdk.ResourceLink:
			parts = append(parts, describeLink(c))
		case *sdk.EmbeddedResource:
			parts = append(parts, describeResource(c.Resource))
		default:
			parts = append(parts, fmt.Sprintf("[%T content]", c))
		}
	}
	return strings.Join(parts, "\n")
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
		fmt.Fprintf(&b, ", %s", size(int(*l.Size)))
	}
	if l.Description != "" {
		fmt.Fprintf(&b, ": %s", l.Description)
	}
	b.WriteString("]")
	return b.String()
}

// describeResource gives an embedded text resource's text under a header
// line (the server embedded it for the model to read) and describes a
// binary one.
func describeResource(r *sdk.ResourceContents) string {
	if r == nil {
		return "[empty resource]"
	}
	if r.Blob != nil {
		return fmt.Sprintf("[resource %s, %s, %s]", r.URI, orUnknown(r.MIMEType), size(len(r.Blob)))
	}
	head := "[resource " + r.URI
	if r.MIMEType != "" {
		head += ", " + r.MIMEType
	}
	return head + "]\n" + r.Text
}

func orUnknown(mime string) string {
	if mime == "" {
		return "of unknown type"
	}
	return mime
}

// size writes a byte count the way people read it: "512 bytes", "12 KiB",
// "3.4 MiB".
func size(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%d KiB", (n+1<<9)>>10)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// clip cuts text to limit bytes on a character boundary and says how much
// was left out.
func clip(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	n := limit
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + fmt.Sprintf("\n[… %d more bytes of output left out]", len(text)-n)
}
