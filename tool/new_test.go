package tool_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/tool"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.Bytes

type searchArgs struct {
	Query string   `json:"query" jsonschema:"description=What to search for.,minLength=1"`
	Limit int      `json:"limit,omitempty" jsonschema:"minimum=1,maximum=20"`
	Sort  string   `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Sites []string `json:"sites,omitempty"`
}

type pathArgs struct {
	Path string `json:"path" jsonschema:"description=Absolute path.,pattern=^/"`
}

func okExec[P any](_ context.Context, _ P) (tool.Result, error) {
	return tool.Result{Content: "ok"}, nil
}

func TestNewRefusals(t *testing.T) {
	spec := func(name string) tool.Spec { return tool.Spec{Name: name, Description: "A tool."} }
	with := func(f func(*tool.Spec)) tool.Spec {
		s := spec("bad_tool")
		f(&s)
		return s
	}
	newPath := func(s tool.Spec) error {
		_, err := tool.New(tool.Def[pathArgs]{Spec: s, Execute: okExec[pathArgs]})
		return err
	}
	tests := []struct {
		name string
		err  error
		want []string // substrings of the error, after the tool's name
		is   error
	}{
		{name: "empty name", err: newPath(spec("")), want: []string{`tool ""`, "name must match"}},
		{name: "65 characters", err: newPath(spec(strings.Repeat("a", 65))), want: []string{strings.Repeat("a", 65), "name must match"}},
		{name: "space", err: newPath(spec("web fetch")), want: []string{`tool "web fetch"`, "name must match"}},
		{name: "dot", err: newPath(spec("web.fetch")), want: []string{`tool "web.fetch"`, "name must match"}},
		{name: "non-ASCII", err: newPath(spec("café")), want: []string{`tool "café"`, "name must match"}},
		{name: "bad namespace", err: newPath(with(func(s *tool.Spec) { s.Namespace = "git hub" })), want: []string{`tool "bad_tool"`, "namespace must match"}},
		{name: "empty description", err: newPath(tool.Spec{Name: "bad_tool"}), want: []string{`tool "bad_tool"`, "description is empty"}},
		{name: "nil execute", err: func() error {
			_, err := tool.New(tool.Def[pathArgs]{Spec: spec("bad_tool")})
			return err
		}(), want: []string{`tool "bad_tool"`, "execute is nil"}},
		{name: "read-only and destructive", err: newPath(with(func(s *tool.Spec) { s.ReadOnly, s.Destructive = true, true })),
			want: []string{`tool "bad_tool"`, "both read-only and destructive"}},
		{name: "destructive and parallel", err: newPath(with(func(s *tool.Spec) { s.Destructive, s.ExecutionMode = true, tool.Parallel })),
			want: []string{`tool "bad_tool"`, "destructive tool must be sequential"}},
		{name: "bad execution mode", err: newPath(with(func(s *tool.Spec) { s.ExecutionMode = "sometimes" })),
			want: []string{`tool "bad_tool"`, `"sometimes"`, "neither parallel nor sequential"}},
		{name: "negative timeout", err: newPath(with(func(s *tool.Spec) { s.Timeout = -1 })),
			want: []string{`tool "bad_tool"`, "timeout is negative"}},
		{name: "raw schema not an object", err: newPath(with(func(s *tool.Spec) { s.JSONSchema = json.RawMessage(`{"type":"string"}`) })),
			want: []string{`tool "bad_tool"`, "root object schema"}, is: schema.ErrNotObject},
		{name: "raw schema an array", err: newPath(with(func(s *tool.Spec) { s.JSONSchema = json.RawMessage(`[{"type":"object"}]`) })),
			want: []string{`tool "bad_tool"`, "root object schema"}, is: schema.ErrNotObject},
		{name: "raw schema not JSON", err: newPath(with(func(s *tool.Spec) { s.JSONSchema = json.RawMessage(`{"type":`) })),
			want: []string{`tool "bad_tool"`, "not valid JSON"}},
		{name: "raw schema remote ref", err: newPath(with(func(s *tool.Spec) {
			s.JSONSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/x.json"}}}`)
		})), want: []string{`tool "bad_tool"`, "not allowed"}},
		{name: "inferred from a non-struct", err: func() error {
			_, err := tool.New(tool.Def[[]string]{Spec: spec("bad_tool"), Execute: okExec[[]string]})
			return err
		}(), want: []string{`tool "bad_tool"`, "[]string is not a struct"}, is: schema.ErrNotObject},
		{name: "strict with open object", err: newPath(with(func(s *tool.Spec) {
			s.Strict = true
			s.JSONSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":true}`)
		})), want: []string{`tool "bad_tool"`, "cannot be made strict", "additional properties"}},
		{name: "strict with oneOf", err: newPath(with(func(s *tool.Spec) {
			s.Strict = true
			s.JSONSchema = json.RawMessage(`{"type":"object","properties":{"path":{"oneOf":[{"type":"string"}]}}}`)
		})), want: []string{`tool "bad_tool"`, "cannot be made strict", `"oneOf"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil {
				t.Fatal("New accepted the definition")
			}
			for _, w := range tt.want {
				if !strings.Contains(tt.err.Error(), w) {
					t.Errorf("error %q does not mention %q", tt.err, w)
				}
			}
			if !strings.HasPrefix(tt.err.Error(), "tool ") {
				t.Errorf("error %q does not start by naming the tool", tt.err)
			}
			if tt.is != nil && !errors.Is(tt.err, tt.is) {
				t.Errorf("error %q does not wrap %v", tt.err, tt.is)
			}
		})
	}
}

func TestNewAcceptsEdgeNames(t *testing.T) {
	for _, name := range []string{"a", strings.Repeat("a", 64), "web_fetch", "list-issues", "X1_y-2"} {
		if _, err := tool.New(tool.Def[pathArgs]{Spec: tool.Spec{Name: name, Namespace: "ns_1", Description: "d"}, Execute: okExec[pathArgs]}); err != nil {
			t.Errorf("New(%q): %v", name, err)
		}
	}
}

func TestMustPanicsOnBadDefinition(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), `tool "x y"`) {
			t.Errorf("Must recovered %v, want a panic naming the tool", r)
		}
	}()
	tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "x y", Description: "d"}, Execute: okExec[pathArgs]})
}

func TestExecutionModeDefaults(t *testing.T) {
	tests := []struct {
		name string
		spec tool.Spec
		want tool.Mode
	}{
		{"read-only defaults to parallel", tool.Spec{ReadOnly: true}, tool.Parallel},
		{"plain defaults to sequential", tool.Spec{}, tool.Sequential},
		{"destructive defaults to sequential", tool.Spec{Destructive: true}, tool.Sequential},
		{"read-only may be sequential", tool.Spec{ReadOnly: true, ExecutionMode: tool.Sequential}, tool.Sequential},
		{"plain may be parallel", tool.Spec{ExecutionMode: tool.Parallel}, tool.Parallel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			s.Name, s.Description = "t", "d"
			tl := tool.Must(tool.Def[pathArgs]{Spec: s, Execute: okExec[pathArgs]})
			if got := tl.Spec().ExecutionMode; got != tt.want {
				t.Errorf("ExecutionMode = %q, want %q", got, tt.want)
			}
		})
	}
}

// definitionTools are the tools whose definitions are golden files.
func definitionTools(t *testing.T) map[string]*tool.Tool {
	t.Helper()
	return map[string]*tool.Tool{
		"typed": tool.Must(tool.Def[searchArgs]{
			Spec:    tool.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true},
			Execute: okExec[searchArgs],
		}),
		"typed_strict": tool.Must(tool.Def[searchArgs]{
			Spec:    tool.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true, Strict: true},
			Execute: okExec[searchArgs],
		}),
		"raw": tool.Must(tool.Def[json.RawMessage]{
			Spec: tool.Spec{Name: "query_db", Description: "Run a read-only SQL query.", Namespace: "db", ReadOnly: true,
				JSONSchema: json.RawMessage(`{
					"type": "object",
					"properties": {
						"sql": {"type": "string", "minLength": 1, "maxLength": 10000, "description": "One SELECT statement."},
						"max_rows": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
						"format": {"type": "string", "enum": ["csv", "json"]},
						"since": {"type": "string", "format": "date-time"}
					},
					"required": ["sql"]
				}`)},
			Execute: okExec[json.RawMessage],
		}),
		"raw_strict_ready": tool.Must(tool.Def[pathArgs]{
			Spec: tool.Spec{Name: "delete_file", Description: "Delete one file.", Destructive: true, Strict: true,
				JSONSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","pattern":"^/"}},"required":["path"],"additionalProperties":false}`)},
			Execute: okExec[pathArgs],
		}),
	}
}

func TestDefinitionGolden(t *testing.T) {
	for name, tl := range definitionTools(t) {
		t.Run(name, func(t *testing.T) {
			def := tl.Definition()
			// The shape: exactly these keys, in this order.
			dec := json.NewDecoder(bytes.NewReader(def))
			if _, err := dec.Token(); err != nil {
				t.Fatal(err)
			}
			var keys []string
			vals := map[string]json.RawMessage{}
			for dec.More() {
				k, _ := dec.Token()
				var v json.RawMessage
				if err := dec.Decode(&v); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, k.(string))
				vals[k.(string)] = v
			}
			if want := []string{"type", "name", "description", "parameters", "strict"}; !reflect.DeepEqual(keys, want) {
				t.Errorf("definition keys = %v, want %v", keys, want)
			}
			sp := tl.Spec()
			if string(vals["type"]) != `"function"` || string(vals["name"]) != fmt.Sprintf("%q", sp.Name) ||
				string(vals["strict"]) != fmt.Sprint(sp.Strict) {
				t.Errorf("definition %s does not match the spec %+v", def, sp)
			}
			if !bytes.Equal(vals["parameters"], tl.Schema()) {
				t.Errorf("parameters = %s, want the sent schema %s", vals["parameters"], tl.Schema())
			}
			var b bytes.Buffer
			if err := json.Indent(&b, def, "", "  "); err != nil {
				t.Fatal(err)
			}
			b.WriteByte('\n')
			golden(t, filepath.Join("definitions", name+".json"), b.Bytes())
		})
	}
}

func TestErrorText(t *testing.T) {
	e := tool.Errorf(tool.NotLoaded, "load %s first", "x")
	if e.Error() != "not_loaded: load x first" {
		t.Errorf("Error() = %q", e.Error())
	}
	b, _ := json.Marshal(e)
	if string(b) != `{"kind":"not_loaded","message":"load x first"}` {
		t.Errorf("JSON = %s", b)
	}
}

// TestStrictByDefault: a schema inferred from a Go type is sent strict
// unless NotStrict says why not; one the strict rewrite cannot express
// needs that reason; a raw schema is sent as its owner says.
func TestStrictByDefault(t *testing.T) {
	strictOf := func(tl *tool.Tool) bool {
		var def struct{ Strict bool }
		if err := json.Unmarshal(tl.Definition(), &def); err != nil {
			t.Fatal(err)
		}
		return def.Strict
	}
	inferred := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "a", Description: "d"}, Execute: okExec[pathArgs]})
	if !strictOf(inferred) || !inferred.Spec().Strict {
		t.Errorf("inferred schema sent %s", inferred.Definition())
	}
	loose := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "b", Description: "d", NotStrict: "a test of the loose path"}, Execute: okExec[pathArgs]})
	if strictOf(loose) {
		t.Errorf("NotStrict tool sent %s", loose.Definition())
	}
	type mapArgs struct {
		Labels map[string]string `json:"labels"`
	}
	if _, err := tool.New(tool.Def[mapArgs]{Spec: tool.Spec{Name: "c", Description: "d"}, Execute: okExec[mapArgs]}); err == nil ||
		!strings.Contains(err.Error(), "NotStrict") {
		t.Errorf("a map field without NotStrict: err = %v, want one asking for the reason", err)
	}
	if m, err := tool.New(tool.Def[mapArgs]{Spec: tool.Spec{Name: "c", Description: "d", NotStrict: "labels is a map, which strict mode cannot express"}, Execute: okExec[mapArgs]}); err != nil || strictOf(m) {
		t.Errorf("a map field with NotStrict: %v", err)
	}
	type openArgs struct {
		Schema json.RawMessage `json:"schema" jsonschema:"type=object"`
	}
	if _, err := tool.New(tool.Def[openArgs]{Spec: tool.Spec{Name: "o", Description: "d"}, Execute: okExec[openArgs]}); err == nil ||
		!strings.Contains(err.Error(), "open object at #/properties/schema") {
		t.Errorf("an open object field without NotStrict: err = %v, want one naming it", err)
	}
	raw := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	if r := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "d", Description: "d", JSONSchema: raw}, Execute: okExec[pathArgs]}); strictOf(r) {
		t.Errorf("raw schema sent strict without Strict: %s", r.Definition())
	}
	if _, err := tool.New(tool.Def[pathArgs]{Spec: tool.Spec{Name: "e", Description: "d", Strict: true, NotStrict: "x"}, Execute: okExec[pathArgs]}); err == nil {
		t.Error("Strict and NotStrict at once accepted")
	}
}

// readParams are written in the MCP Go SDK's style: the tag is the
// description.
type readParams struct {
	Path string `json:"path" jsonschema:"the file to read, relative to the home"`
}

type droppedParams struct {
	Path string `json:"path" jsonschema:"description=the file, relative to the home"`
}

// A tag in the MCP Go SDK's style reaches the model as the description;
// one the schema would read only part of is refused by tool.New.
func TestNewReadsSDKStyleTags(t *testing.T) {
	run := func(context.Context, readParams) (tool.Result, error) { return tool.Result{}, nil }
	tl, err := tool.New(tool.Def[readParams]{Spec: tool.Spec{Name: "read", Description: "Read a file."}, Execute: run})
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		Parameters struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(tl.Definition(), &def); err != nil {
		t.Fatal(err)
	}
	if got := def.Parameters.Properties["path"].Description; got != "the file to read, relative to the home" {
		t.Errorf("the model reads the description %q, want the whole tag; definition %s", got, tl.Definition())
	}

	_, err = tool.New(tool.Def[droppedParams]{Spec: tool.Spec{Name: "read", Description: "Read a file."},
		Execute: func(context.Context, droppedParams) (tool.Result, error) { return tool.Result{}, nil }})
	if err == nil || !strings.Contains(err.Error(), "droppedParams.Path") || !strings.Contains(err.Error(), `\,`) {
		t.Errorf("a description cut at its comma: %v, want it refused naming the field and the escape", err)
	}
}
