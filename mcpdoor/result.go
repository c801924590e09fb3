package mcpdoor

import (
	"encoding/base64"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/protocol"
)

// outputPart is a part of a function_call_output whose output is an
// array: input_text, input_image, input_file.
type outputPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL string `json:"image_url"`
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

// toResult is a call's output as MCP content: the text the model would
// read (with isError on an error of any kind), images as image content,
// files as embedded resources, and the text again as structuredContent
// when it is a JSON object.
func toResult(ev *protocol.CallOutput) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: ev.Status != protocol.StatusOK}
	var item struct {
		Type   string            `json:"type"`
		Output json.RawMessage   `json:"output"`
		Tools  []json.RawMessage `json:"tools"`
	}
	_ = json.Unmarshal(ev.Item, &item)
	if item.Type == protocol.ItemToolSearchOutput {
		// The loaded tools' full definitions, as the model would read them.
		if item.Tools == nil {
			item.Tools = []json.RawMessage{}
		}
		b, _ := json.Marshal(map[string]any{"tools": item.Tools})
		res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		res.StructuredContent = json.RawMessage(b)
		return res
	}
	var text string
	var parts []outputPart
	switch {
	case json.Unmarshal(item.Output, &text) == nil:
		res.Content = append(res.Content, &mcp.TextContent{Text: text})
		if !res.IsError {
			res.StructuredContent = jsonObject(text)
		}
	case json.Unmarshal(item.Output, &parts) == nil:
		for _, p := range parts {
			switch p.Type {
			case "input_text":
				res.Content = append(res.Content, &mcp.TextContent{Text: p.Text})
			case "input_image":
				if mime, data, ok := dataURL(p.ImageURL); ok {
					res.Content = append(res.Content, &mcp.ImageContent{MIMEType: mime, Data: data})
				}
			case "input_file":
				if mime, data, ok := dataURL(p.FileData); ok {
					res.Content = append(res.Content, &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///" + strings.TrimLeft(p.Filename, "/"), MIMEType: mime, Blob: data}})
				}
			}
		}
	}
	if len(res.Content) == 0 && ev.Error != nil {
		res.Content = append(res.Content, &mcp.TextContent{Text: ev.Error.Message})
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	return res
}

// jsonObject is text as structured content when it is a JSON object.
func jsonObject(text string) any {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "{") || !json.Valid([]byte(t)) {
		return nil
	}
	return json.RawMessage(t)
}

// dataURL decodes "data:<mime>;base64,<data>".
func dataURL(s string) (mime string, data []byte, ok bool) {
	rest, ok := strings.CutPrefix(s, "data:")
	if !ok {
		return "", nil, false
	}
	head, b64, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, false
	}
	mime, isB64 := strings.CutSuffix(head, ";base64")
	if !isB64 {
		return "", nil, false
	}
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", nil, false
	}
	return mime, data, true
}
