package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/tool"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func testServer(cfg ServerConfig) *server {
	m := &Manager{opts: Options{MaxResultBytes: 200}}
	return &server{name: "srv", cfg: cfg, m: m, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func TestBuild(t *testing.T) {
	s := testServer(ServerConfig{Tools: map[string]ToolConfig{"hidden": {Disabled: true}}})
	list := []*sdk.Tool{
		{Name: "plain", Description: "Plain.", InputSchema: map[string]any{"type": "object"}},
		{Name: "no_schema", Description: "No schema."},
		{Name: "titled", Title: "A titled tool", InputSchema: map[string]any{"type": "object"}},
		{Name: "bare", InputSchema: map[string]any{"type": "object"}},
		{Name: "string_schema", Description: "Not an object.", InputSchema: map[string]any{"type": "string"}},
		{Name: "bad.name", Description: "Dotted.", InputSchema: map[string]any{"type": "object"}},
		{Name: "hidden", Description: "Disabled.", InputSchema: map[string]any{"type": "object"}},
	}
	ts := s.build(list, nil, "Namespace.")
	var names []string
	for _, tool := range ts.tools {
		names = append(names, tool.Name())
	}
	if !slices.Equal(names, []string{"plain", "no_schema", "titled", "bare"}) {
		t.Errorf("tools %q", names)
	}
	if len(ts.notes) != 2 || !strings.Contains(ts.notes[0], `tool "string_schema" is left out`) || !strings.Contains(ts.notes[1], `tool "bad.name" is left out`) {
		t.Errorf("notes %q", ts.notes)
	}
	if got := ts.tools[2].Spec().Description; got != "A titled tool" {
		t.Errorf("titled description %q", got)
	}
	if got := ts.tools[3].Spec().Description; got != "The tool bare of the MCP server srv." {
		t.Errorf("bare description %q", got)
	}
	if got := string(ts.tools[1].Schema()); got != `{"type":"object"}` {
		t.Errorf("no_schema parameters %s", got)
	}
	if again := s.build(list, nil, "Namespace."); again != ts {
		t.Error("the same list was built again")
	}
	if other := s.build(list, nil, "Another namespace."); other == ts {
		t.Error("a new namespace description kept the old tools")
	}
}

func TestHints(t *testing.T) {
	tests := []struct {
		a                     *sdk.ToolAnnotations
		readOnly, destructive bool
	}{
		{nil, false, true},
		{&sdk.ToolAnnotations{}, false, true},
		{&sdk.ToolAnnotations{ReadOnlyHint: true}, true, false},
		{&sdk.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: new(true)}, true, false},
		{&sdk.ToolAnnotations{DestructiveHint: new(false)}, false, false},
		{&sdk.ToolAnnotations{DestructiveHint: new(true)}, false, true},
	}
	for i, tt := range tests {
		if r, d := hints(tt.a); r != tt.readOnly || d != tt.destructive {
			t.Errorf("%d: read-only %v destructive %v, want %v %v", i, r, d, tt.readOnly, tt.destructive)
		}
	}
}

func TestResult(t *testing.T) {
	s := testServer(ServerConfig{})
	tests := []struct {
		name    string
		res     *sdk.CallToolResult
		content string
		err     string
		details string
		media   []string
		schema  string // the tool's outputSchema
	}{
		{name: "text joined", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}}, content: "a\nb"},
		{name: "media", res: &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: "before"},
			&sdk.ImageContent{MIMEType: "image/png", Data: make([]byte, 12<<10)},
			&sdk.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 100)},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "file:///r/report.pdf", Blob: []byte("%PDF-1.4"), MIMEType: "application/pdf"}},
			&sdk.TextContent{Text: "after"},
		}}, content: "before\nafter", media: []string{
			"image/png 12288 bytes , the MCP tool srv.t",
			"audio/wav 100 bytes , the MCP tool srv.t",
			"application/pdf 8 bytes file:///r/report.pdf, file:///r/report.pdf (a resource of the MCP tool srv.t)",
		}},
		{name: "links and resources", res: &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.ResourceLink{URI: "file:///a.txt", Name: "a", MIMEType: "text/plain", Size: new(int64(2048)), Description: "the file"},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://b", Blob: []byte("xyz"), MIMEType: "application/gzip"}},
			&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "mem://c", Text: "see", MIMEType: "text/plain"}},
		}}, content: "[resource link file:///a.txt \"a\", text/plain, 2 KiB: the file]\n[resource mem://c, text/plain]\nsee",
			media: []string{"application/gzip 3 bytes mem://b, mem://b (a resource of the MCP tool srv.t)"}},
		{name: "structured beside media only", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: []byte("x")}}, StructuredContent: map[string]any{"n": 1}},
			content: `{"n":1}`, details: `{"n":1}`, media: []string{"image/png 1 bytes , the MCP tool srv.t"}},
		{name: "structured only", res: &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, content: `{"n":1}`, details: `{"n":1}`},
		{name: "structured beside text", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "one"}}, StructuredContent: map[string]any{"n": 1}}, content: "one\n[structured content]\n{\"n\":1}", details: `{"n":1}`},
		{name: "structured that is the text", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "{ \"n\": 1 }"}}, StructuredContent: map[string]any{"n": 1}}, content: `{ "n": 1 }`, details: `{"n":1}`},
		{name: "large structured content left out of details", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "x"}}, StructuredContent: map[string]any{"s": strings.Repeat("y", 300)}},
			content: clip("x\n[structured content]\n{\"s\":\""+strings.Repeat("y", 300)+"\"}", 200), details: `{"structured_content_bytes":308,"truncated":true}`},
		{name: "structured valid against the output schema", schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`,
			res: &sdk.CallToolResult{StructuredContent: map[string]any{"n": 1}}, content: `{"n":1}`, details: `{"n":1}`},
		{name: "structured invalid against the output schema", schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n","m"]}`,
			res: &sdk.CallToolResult{StructuredContent: map[string]any{"n": "one"}},
			err: "tool_error: The MCP server srv ran t, but its structured result does not match the tool's output schema (/: missing properties: 'm'; /n: expected integer, but got string), so it is not given as the tool's output. Check its effect before calling it again, or do without this tool."},
		{name: "no structured content for an output schema", schema: `{"type":"object"}`, res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "x"}}},
			err: "tool_error: The MCP server srv ran t, but its result has no structured content although the tool declares an output schema, so its output is incomplete. Check its effect before calling it again, or do without this tool."},
		{name: "an error result needs no structured content", schema: `{"type":"object"}`, res: &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "bad"}}}, err: "tool_error: bad"},
		{name: "is error", res: &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such issue"}}}, err: "tool_error: no such issue"},
		{name: "is error without text", res: &sdk.CallToolResult{IsError: true}, err: "tool_error: The tool reported an error without saying what it was."},
		{name: "clipped", res: &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Repeat("é", 120)}}},
			content: strings.Repeat("é", 100) + "\n[… 40 more bytes of output left out]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out *outputSchema
			if tt.schema != "" {
				var err error
				if out, err = compileOutputSchema(&sdk.Tool{Name: "t", OutputSchema: json.RawMessage(tt.schema)}); err != nil {
					t.Fatal(err)
				}
			}
			res, err := s.result(tt.res, "t", out)
			if tt.err != "" {
				var te *tool.Error
				if !errors.As(err, &te) || err.Error() != tt.err {
					t.Fatalf("error %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil || res.Content != tt.content {
				t.Errorf("content %q, %v; want %q", res.Content, err, tt.content)
			}
			if tt.details != "" {
				if b, _ := json.Marshal(res.Details); string(b) != tt.details {
					t.Errorf("details %s, want %s", b, tt.details)
				}
			}
			var got []string
			for _, m := range res.Media {
				got = append(got, fmt.Sprintf("%s %d bytes %s, %s", m.MIMEType, len(m.Data), m.Filename, m.Source))
			}
			if !slices.Equal(got, tt.media) {
				t.Errorf("media %q, want %q", got, tt.media)
			}
		})
	}
}

func TestNamespaceDescription(t *testing.T) {
	long := strings.Repeat("Use the tools well. ", 40)
	tests := []struct {
		cfg  ServerConfig
		init *sdk.InitializeResult
		want string
	}{
		{ServerConfig{Description: "Configured."}, &sdk.InitializeResult{Instructions: "Ignored."}, "Configured."},
		{ServerConfig{}, &sdk.InitializeResult{Instructions: "  Use it.\n"}, "Use it."},
		{ServerConfig{}, &sdk.InitializeResult{ServerInfo: &sdk.Implementation{Name: "x-server", Version: "1.2"}}, "Tools of the MCP server srv (x-server 1.2)."},
		{ServerConfig{}, nil, "Tools of the MCP server srv."},
	}
	for _, tt := range tests {
		if got := namespaceDescription("srv", tt.cfg, tt.init); got != tt.want {
			t.Errorf("namespaceDescription = %q, want %q", got, tt.want)
		}
	}
	got := namespaceDescription("srv", ServerConfig{}, &sdk.InitializeResult{Instructions: long})
	if len(got) > MaxInstructionsDescription || !strings.HasSuffix(got, "well. …") {
		t.Errorf("long instructions cut to %d bytes: %q", len(got), got)
	}
	if got := cut(strings.Repeat("wörd ", 200), 50); len(got) > 50 || !strings.HasSuffix(got, "wörd…") {
		t.Errorf("cut at a word: %q", got)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, json, err string
	}{
		{"stdio", `{"servers":{"a":{"command":"x","args":["-v"],"env":{"K":"V"},"dir":"/tmp","defer":false,"timeout":"5s","tools":{"t":{"defer":true,"timeout":"1s"}}}}}`, ""},
		{"http", `{"servers":{"a":{"url":"https://h/mcp","headers":{"Authorization":"Bearer x"},"connect_timeout":"3s"}}}`, ""},
		{"empty", `{}`, ""},
		{"neither", `{"servers":{"a":{}}}`, "needs a command"},
		{"both", `{"servers":{"a":{"command":"x","url":"http://h"}}}`, "give one"},
		{"bad url", `{"servers":{"a":{"url":"ftp://h"}}}`, "not an http(s) URL"},
		{"args with url", `{"servers":{"a":{"url":"http://h","args":["x"]}}}`, "belong to a command"},
		{"headers with command", `{"servers":{"a":{"command":"x","headers":{"a":"b"}}}}`, "belong to a url"},
		{"bad name", `{"servers":{"a.b":{"command":"x"}}}`, "namespace"},
		{"negative timeout", `{"servers":{"a":{"command":"x","timeout":"-1s"}}}`, "negative"},
		{"bad duration", `{"servers":{"a":{"command":"x","timeout":"soon"}}}`, "invalid duration"},
		{"number duration", `{"servers":{"a":{"command":"x","timeout":30}}}`, "a duration is a string"},
		{"unknown field", `{"servers":{"a":{"command":"x","comand":"y"}}}`, "unknown field"},
		{"trailing data", `{"servers":{}} {}`, "data after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tt.json))
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("ParseConfig = %v, want %q", err, tt.err)
			}
		})
	}
	cfg, _ := ParseConfig([]byte(tests[0].json))
	a := cfg.Servers["a"]
	if a.deferred("t") != true || a.deferred("u") != false || a.timeout("t") != time.Second || a.timeout("u") != 5*time.Second {
		t.Errorf("per-tool settings: %v %v %s %s", a.deferred("t"), a.deferred("u"), a.timeout("t"), a.timeout("u"))
	}
	if (ServerConfig{}).deferred("x") != true || (ServerConfig{}).connectTimeout() != DefaultConnectTimeout {
		t.Error("defaults")
	}
	path := t.TempDir() + "/mcp.json"
	if err := os.WriteFile(path, []byte(`{"servers":{"a":{}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadConfig error %v does not name the file", err)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv("MCP_TEST_SECRET", "s3cret")
	t.Setenv("WORKER_PASSWORD", "nats")
	if got := expand("Bearer ${MCP_TEST_SECRET} costs $5 ${NOT_SET}"); got != "Bearer s3cret costs $5 " {
		t.Errorf("expand = %q", got)
	}
	env := childEnv(map[string]string{"TOKEN": "${MCP_TEST_SECRET}", "A": "1"})
	joined := strings.Join(env, "\n")
	if !strings.Contains(joined, "TOKEN=s3cret") || !strings.Contains(joined, "A=1") || strings.Contains(joined, "WORKER_PASSWORD") {
		t.Errorf("child environment %q", env)
	}
	if os.Getenv("PATH") != "" && !strings.Contains(joined, "PATH=") {
		t.Error("PATH is not passed on")
	}
}

// An output schema that cannot be compiled here (a remote reference, not
// a schema) leaves its tool out with the reason, as an input schema does.
func TestOutputSchemaRefused(t *testing.T) {
	for _, schema := range []string{`{"$ref":"https://example.com/s.json"}`, `{"type":5}`} {
		if _, err := compileOutputSchema(&sdk.Tool{Name: "t", OutputSchema: json.RawMessage(schema)}); err == nil || !strings.Contains(err.Error(), "output schema is not usable") {
			t.Errorf("%s: %v", schema, err)
		}
	}
	if o, err := compileOutputSchema(&sdk.Tool{Name: "t"}); o != nil || err != nil {
		t.Errorf("no schema: %v %v", o, err)
	}
}
