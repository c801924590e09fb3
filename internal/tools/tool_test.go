package tools_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/tools"
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

type noArgs struct {
	Verbose bool `json:"verbose,omitempty"`
}

func okExec[P any](_ context.Context, _ P) (tools.Result, error) {
	return tools.Result{Content: "ok"}, nil
}

func TestNewRefusals(t *testing.T) {
	spec := func(name string) tools.Spec { return tools.Spec{Name: name, Description: "A tool."} }
	with := func(f func(*tools.Spec)) tools.Spec {
		s := spec("bad_tool")
		f(&s)
		return s
	}
	newPath := func(s tools.Spec) error {
		_, err := tools.New(tools.Def[pathArgs]{Spec: s, Execute: okExec[pathArgs]})
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
		{name: "bad namespace", err: newPath(with(func(s *tools.Spec) { s.Namespace = "git hub" })), want: []string{`tool "bad_tool"`, "namespace must match"}},
		{name: "empty description", err: newPath(tools.Spec{Name: "bad_tool"}), want: []string{`tool "bad_tool"`, "description is empty"}},
		{name: "nil execute", err: func() error {
			_, err := tools.New(tools.Def[pathArgs]{Spec: spec("bad_tool")})
			return err
		}(), want: []string{`tool "bad_tool"`, "execute is nil"}},
		{name: "read-only and destructive", err: newPath(with(func(s *tools.Spec) { s.ReadOnly, s.Destructive = true, true })),
			want: []string{`tool "bad_tool"`, "both read-only and destructive"}},
		{name: "destructive and parallel", err: newPath(with(func(s *tools.Spec) { s.Destructive, s.ExecutionMode = true, tools.Parallel })),
			want: []string{`tool "bad_tool"`, "destructive tool must be sequential"}},
		{name: "bad execution mode", err: newPath(with(func(s *tools.Spec) { s.ExecutionMode = "sometimes" })),
			want: []string{`tool "bad_tool"`, `"sometimes"`, "neither parallel nor sequential"}},
		{name: "negative timeout", err: newPath(with(func(s *tools.Spec) { s.Timeout = -1 })),
			want: []string{`tool "bad_tool"`, "timeout is negative"}},
		{name: "raw schema not an object", err: newPath(with(func(s *tools.Spec) { s.JSONSchema = json.RawMessage(`{"type":"string"}`) })),
			want: []string{`tool "bad_tool"`, "root object schema"}, is: schema.ErrNotObject},
		{name: "raw schema an array", err: newPath(with(func(s *tools.Spec) { s.JSONSchema = json.RawMessage(`[{"type":"object"}]`) })),
			want: []string{`tool "bad_tool"`, "root object schema"}, is: schema.ErrNotObject},
		{name: "raw schema not JSON", err: newPath(with(func(s *tools.Spec) { s.JSONSchema = json.RawMessage(`{"type":`) })),
			want: []string{`tool "bad_tool"`, "not valid JSON"}},
		{name: "raw schema remote ref", err: newPath(with(func(s *tools.Spec) {
			s.JSONSchema = json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/x.json"}}}`)
		})), want: []string{`tool "bad_tool"`, "not allowed"}},
		{name: "inferred from a non-struct", err: func() error {
			_, err := tools.New(tools.Def[[]string]{Spec: spec("bad_tool"), Execute: okExec[[]string]})
			return err
		}(), want: []string{`tool "bad_tool"`, "[]string is not a struct"}, is: schema.ErrNotObject},
		{name: "strict with open object", err: newPath(with(func(s *tools.Spec) {
			s.Strict = true
			s.JSONSchema = json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":true}`)
		})), want: []string{`tool "bad_tool"`, "cannot be made strict", "additional properties"}},
		{name: "strict with oneOf", err: newPath(with(func(s *tools.Spec) {
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
		if _, err := tools.New(tools.Def[pathArgs]{Spec: tools.Spec{Name: name, Namespace: "ns_1", Description: "d"}, Execute: okExec[pathArgs]}); err != nil {
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
	tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "x y", Description: "d"}, Execute: okExec[pathArgs]})
}

func TestExecutionModeDefaults(t *testing.T) {
	tests := []struct {
		name string
		spec tools.Spec
		want tools.Mode
	}{
		{"read-only defaults to parallel", tools.Spec{ReadOnly: true}, tools.Parallel},
		{"plain defaults to sequential", tools.Spec{}, tools.Sequential},
		{"destructive defaults to sequential", tools.Spec{Destructive: true}, tools.Sequential},
		{"read-only may be sequential", tools.Spec{ReadOnly: true, ExecutionMode: tools.Sequential}, tools.Sequential},
		{"plain may be parallel", tools.Spec{ExecutionMode: tools.Parallel}, tools.Parallel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.spec
			s.Name, s.Description = "t", "d"
			tool := tools.Must(tools.Def[pathArgs]{Spec: s, Execute: okExec[pathArgs]})
			if got := tool.Spec().ExecutionMode; got != tt.want {
				t.Errorf("ExecutionMode = %q, want %q", got, tt.want)
			}
		})
	}
}

// definitionTools are the tools whose definitions are golden files.
func definitionTools(t *testing.T) map[string]*tools.Tool {
	t.Helper()
	return map[string]*tools.Tool{
		"typed": tools.Must(tools.Def[searchArgs]{
			Spec:    tools.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true},
			Execute: okExec[searchArgs],
		}),
		"typed_strict": tools.Must(tools.Def[searchArgs]{
			Spec:    tools.Spec{Name: "web_search", Description: "Search the web.", ReadOnly: true, Strict: true},
			Execute: okExec[searchArgs],
		}),
		"raw": tools.Must(tools.Def[json.RawMessage]{
			Spec: tools.Spec{Name: "query_db", Description: "Run a read-only SQL query.", Namespace: "db", ReadOnly: true,
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
		"raw_strict_ready": tools.Must(tools.Def[pathArgs]{
			Spec: tools.Spec{Name: "delete_file", Description: "Delete one file.", Destructive: true, Strict: true,
				JSONSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string","pattern":"^/"}},"required":["path"],"additionalProperties":false}`)},
			Execute: okExec[pathArgs],
		}),
	}
}

func TestDefinitionGolden(t *testing.T) {
	for name, tool := range definitionTools(t) {
		t.Run(name, func(t *testing.T) {
			def := tool.Definition()
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
			sp := tool.Spec()
			if string(vals["type"]) != `"function"` || string(vals["name"]) != fmt.Sprintf("%q", sp.Name) ||
				string(vals["strict"]) != fmt.Sprint(sp.Strict) {
				t.Errorf("definition %s does not match the spec %+v", def, sp)
			}
			if !bytes.Equal(vals["parameters"], tool.Schema()) {
				t.Errorf("parameters = %s, want the sent schema %s", vals["parameters"], tool.Schema())
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

// counted wraps a tool body to count its runs.
func counted[P any](n *atomic.Int32, f func(P) string) func(context.Context, P) (tools.Result, error) {
	return func(_ context.Context, p P) (tools.Result, error) {
		n.Add(1)
		return tools.Result{Content: f(p)}, nil
	}
}

func TestPrepare(t *testing.T) {
	var runs atomic.Int32
	search := tools.Must(tools.Def[searchArgs]{
		Spec:    tools.Spec{Name: "web_search", Description: "Search.", ReadOnly: true},
		Execute: counted(&runs, func(p searchArgs) string { return fmt.Sprintf("%s/%d/%s/%v", p.Query, p.Limit, p.Sort, p.Sites) }),
	})
	opts := tools.Must(tools.Def[noArgs]{
		Spec:    tools.Spec{Name: "status", Description: "Status.", ReadOnly: true},
		Execute: counted(&runs, func(p noArgs) string { return fmt.Sprintf("verbose=%v", p.Verbose) }),
	})
	del := tools.Must(tools.Def[pathArgs]{
		Spec:    tools.Spec{Name: "delete_file", Description: "Delete.", Destructive: true},
		Execute: counted(&runs, func(p pathArgs) string { return "deleted " + p.Path }),
	})
	tests := []struct {
		name    string
		tool    *tools.Tool
		args    string
		content string   // the run's content when prepared
		repairs []string // when prepared
		errHas  []string // when refused: substrings of the invalid_arguments message
	}{
		{name: "valid", tool: search, args: `{"query":"go","limit":3,"sort":"date","sites":["go.dev"]}`, content: "go/3/date/[go.dev]"},
		{name: "empty string means {}", tool: opts, args: ``, content: "verbose=false"},
		{name: "empty string still validated", tool: search, args: ``,
			errHas: []string{"- /: missing properties: 'query'"}},
		{name: "fenced arguments repaired", tool: search, args: "```json\n{\"query\":\"go\"}\n```", content: "go/0//[]",
			repairs: []string{schema.RungStripFences}},
		{name: "truncated arguments refused", tool: search, args: `{"query":"go","sites":["a","b`,
			errHas: []string{"cut off at byte 29, inside a string at /sites/1", "sent whole"}},
		{name: "lossless repairs taken", tool: search, args: `{query: 'go', sites: ['a',],}`, content: "go/0//[a]",
			repairs: []string{schema.RungTrailingCommas, schema.RungUnquotedKeys, schema.RungSingleQuotes}},
		{name: "destructive truncated refused", tool: del, args: `{"path":"/tmp/important`,
			errHas: []string{"cut off at byte 23", "send the complete JSON object again"}},
		{name: "destructive lossless repairs taken", tool: del, args: `{"path": "/tmp/x",} // the file`, content: "deleted /tmp/x",
			repairs: []string{schema.RungStripFences, schema.RungTrailingCommas}},
		{name: "destructive fenced repaired", tool: del, args: "```\n{\"path\":\"/tmp/x\"}\n```", content: "deleted /tmp/x",
			repairs: []string{schema.RungStripFences}},
		{name: "every violation with its pointer", tool: search, args: `{"query":"","limit":50,"sort":"size","sites":[1]}`,
			errHas: []string{"Violations (JSON pointer: problem):", "- /query: ", "- /limit: ", "- /sort: ", "- /sites/0: "}},
		{name: "repairs named on a refusal", tool: search, args: "```json\n{\"limit\":0}\n```",
			errHas: []string{"Repairs applied before this check: strip_fences.", "- /limit: "}},
		{name: "too large", tool: search, args: `{"query":` + strings.Repeat(" ", 2<<20), errHas: []string{"cut off at byte 2097161", "repair limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runs.Load()
			inv, err := tools.Prepare(tt.tool, tt.args, 0)
			if tt.errHas != nil {
				if inv != nil {
					t.Fatalf("Prepare returned an invocation and %v", err)
				}
				var te *tools.Error
				if !errors.As(err, &te) || te.Kind != tools.InvalidArguments {
					t.Fatalf("Prepare error = %v, want an *Error of kind invalid_arguments", err)
				}
				for _, w := range append([]string{
					"The arguments for " + tt.tool.Name() + " were rejected.",
					"Expected a JSON object matching this schema: " + string(tt.tool.Schema()),
				}, tt.errHas...) {
					if !strings.Contains(te.Message, w) {
						t.Errorf("message does not contain %q:\n%s", w, te.Message)
					}
				}
				if runs.Load() != before {
					t.Error("the tool ran")
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if !reflect.DeepEqual(inv.Repairs, tt.repairs) {
				t.Errorf("Repairs = %v, want %v", inv.Repairs, tt.repairs)
			}
			if inv.Tool != tt.tool {
				t.Errorf("Invocation.Tool = %p, want %p", inv.Tool, tt.tool)
			}
			if runs.Load() != before {
				t.Error("Prepare ran the tool")
			}
			res, err := inv.Run(context.Background())
			if err != nil || res.Content != tt.content {
				t.Errorf("Run = %q, %v; want %q", res.Content, err, tt.content)
			}
		})
	}
}

func TestPrepareLargeSchemaNotQuoted(t *testing.T) {
	long := strings.Repeat("Explain at length. ", 300)
	tool := tools.Must(tools.Def[pathArgs]{
		Spec: tools.Spec{Name: "big", Description: "d",
			JSONSchema: json.RawMessage(`{"type":"object","description":"` + long + `","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		Execute: okExec[pathArgs],
	})
	_, err := tools.Prepare(tool, `{}`, 0)
	var te *tools.Error
	if !errors.As(err, &te) {
		t.Fatalf("Prepare = %v", err)
	}
	if strings.Contains(te.Message, long) || !strings.Contains(te.Message, "see the tool definition") {
		t.Errorf("a large schema should be referred to, not quoted:\n%.300s", te.Message)
	}
}

// A raw schema that disagrees with the Go type: the arguments validate but
// cannot be decoded, which is still the model's invalid_arguments, not a
// crash.
func TestPrepareSchemaTypeMismatch(t *testing.T) {
	tool := tools.Must(tools.Def[pathArgs]{
		Spec:    tools.Spec{Name: "odd", Description: "d", JSONSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"integer"}}}`)},
		Execute: okExec[pathArgs],
	})
	_, err := tools.Prepare(tool, `{"path":3}`, 0)
	var te *tools.Error
	if !errors.As(err, &te) || te.Kind != tools.InvalidArguments || !strings.Contains(te.Message, "do not fit") {
		t.Errorf("Prepare = %v, want invalid_arguments saying the arguments do not fit", err)
	}
}

func TestStrictNullsReachTheToolAsAbsent(t *testing.T) {
	type args struct {
		Query string `json:"query"`
		Limit *int   `json:"limit,omitempty" jsonschema:"minimum=1"`
	}
	var got args
	tool := tools.Must(tools.Def[args]{
		Spec: tools.Spec{Name: "s", Description: "d", Strict: true},
		Execute: func(_ context.Context, p args) (tools.Result, error) {
			got = p
			return tools.Result{}, nil
		},
	})
	inv, err := tools.Prepare(tool, `{"query":"go","limit":null}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.Query != "go" || got.Limit != nil {
		t.Errorf("tool got %+v", got)
	}
	if _, err := tools.Prepare(tool, `{"query":"go","limit":0}`, 0); err == nil {
		t.Error("a strict tool accepted a value below its minimum")
	}
}

func TestRun(t *testing.T) {
	run := func(f func(context.Context, pathArgs) (tools.Result, error)) (tools.Result, error) {
		tool := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "t", Description: "d"}, Execute: f})
		inv, err := tools.Prepare(tool, `{"path":"/x"}`, 0)
		if err != nil {
			t.Fatal(err)
		}
		return inv.Run(context.Background())
	}
	kindOf := func(err error) tools.Kind {
		var te *tools.Error
		if !errors.As(err, &te) {
			return ""
		}
		return te.Kind
	}

	t.Run("success", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tools.Result, error) {
			return tools.Result{Content: "done", EndTurn: true, Details: map[string]int{"n": 1}}, nil
		})
		if err != nil || res.Content != "done" || !res.EndTurn {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("panic becomes tool_error", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tools.Result, error) { panic("disk on fire") })
		if kindOf(err) != tools.ToolError || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("Run error = %v, want tool_error with the panic value", err)
		}
		d, _ := res.Details.(map[string]string)
		if d["panic"] != "disk on fire" || !strings.Contains(d["stack"], "tool_test.go") {
			t.Errorf("Details = %v, want the panic and its stack", res.Details)
		}
	})
	t.Run("nil panic becomes tool_error", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tools.Result, error) { panic(nil) })
		if kindOf(err) != tools.ToolError {
			t.Errorf("Run error = %v, want tool_error", err)
		}
	})
	t.Run("plain error becomes tool_error", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tools.Result, error) {
			return tools.Result{}, errors.New("no such file")
		})
		var te *tools.Error
		if !errors.As(err, &te) || te.Kind != tools.ToolError || te.Message != "no such file" {
			t.Errorf("Run error = %#v, want tool_error \"no such file\"", err)
		}
	})
	t.Run("coded error kept", func(t *testing.T) {
		want := tools.Errorf(tools.InvalidArguments, "path %s is not a file", "/x")
		_, err := run(func(context.Context, pathArgs) (tools.Result, error) { return tools.Result{}, want })
		if err != want {
			t.Errorf("Run error = %v, want the tool's own *Error", err)
		}
	})
	t.Run("wrapped coded error kept", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tools.Result, error) {
			return tools.Result{}, fmt.Errorf("fetching: %w", tools.Errorf(tools.Timeout, "upstream slow"))
		})
		if kindOf(err) != tools.Timeout {
			t.Errorf("Run error = %v, want kind timeout", err)
		}
	})
	t.Run("content kept with an error", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tools.Result, error) {
			return tools.Result{Content: "partial"}, errors.New("boom")
		})
		if res.Content != "partial" || err == nil {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("context reaches the tool", func(t *testing.T) {
		tool := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "t", Description: "d"},
			Execute: func(ctx context.Context, _ pathArgs) (tools.Result, error) {
				c, ok := tools.CallFrom(ctx)
				if !ok {
					return tools.Result{}, errors.New("no call in context")
				}
				return tools.Result{Content: fmt.Sprintf("%s/%s/%d/%s", c.AgentID, c.TurnID, c.Step, c.CallID)}, nil
			}})
		inv, _ := tools.Prepare(tool, `{"path":"/"}`, 0)
		ctx := tools.WithCall(context.Background(), tools.Call{AgentID: "a1", TurnID: "t1", Step: 2, CallID: "c9"})
		res, err := inv.Run(ctx)
		if err != nil || res.Content != "a1/t1/2/c9" {
			t.Errorf("Run = %q, %v", res.Content, err)
		}
	})
}

func TestErrorText(t *testing.T) {
	e := tools.Errorf(tools.NotLoaded, "load %s first", "x")
	if e.Error() != "not_loaded: load x first" {
		t.Errorf("Error() = %q", e.Error())
	}
	b, _ := json.Marshal(e)
	if string(b) != `{"kind":"not_loaded","message":"load x first"}` {
		t.Errorf("JSON = %s", b)
	}
}

func TestActivity(t *testing.T) {
	both := tools.Must(tools.Def[pathArgs]{
		Spec:     tools.Spec{Name: "read", Description: "d", ReadOnly: true},
		Activity: func(p pathArgs) string { return "Reading " + p.Path },
		CompletedActivity: func(p pathArgs, r tools.Result) string {
			return fmt.Sprintf("Read %s (%d bytes)", p.Path, len(r.Content))
		},
		Execute: func(context.Context, pathArgs) (tools.Result, error) { return tools.Result{Content: "hello"}, nil },
	})
	startOnly := tools.Must(tools.Def[pathArgs]{
		Spec:     tools.Spec{Name: "stat", Description: "d", ReadOnly: true},
		Activity: func(p pathArgs) string { return "Checking " + p.Path },
		Execute:  okExec[pathArgs],
	})
	none := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "quiet", Description: "d"}, Execute: okExec[pathArgs]})
	tests := []struct {
		tool           *tools.Tool
		started, ended string
	}{
		{both, "Reading /etc/hosts", "Read /etc/hosts (5 bytes)"},
		{startOnly, "Checking /etc/hosts", "Checking /etc/hosts"},
		{none, "", ""},
	}
	for _, tt := range tests {
		inv, err := tools.Prepare(tt.tool, `{"path":"/etc/hosts"}`, 0)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := inv.Run(context.Background())
		if inv.Activity != tt.started || inv.CompletedActivity(res) != tt.ended {
			t.Errorf("%s: Activity = %q, CompletedActivity = %q; want %q, %q",
				tt.tool.Name(), inv.Activity, inv.CompletedActivity(res), tt.started, tt.ended)
		}
	}
}

// TestStrictByDefault: a schema inferred from a Go type is sent strict
// unless NotStrict says why not; one the strict rewrite cannot express
// needs that reason; a raw schema is sent as its owner says.
func TestStrictByDefault(t *testing.T) {
	strictOf := func(tl *tools.Tool) bool {
		var def struct{ Strict bool }
		if err := json.Unmarshal(tl.Definition(), &def); err != nil {
			t.Fatal(err)
		}
		return def.Strict
	}
	inferred := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "a", Description: "d"}, Execute: okExec[pathArgs]})
	if !strictOf(inferred) || !inferred.Spec().Strict {
		t.Errorf("inferred schema sent %s", inferred.Definition())
	}
	loose := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "b", Description: "d", NotStrict: "a test of the loose path"}, Execute: okExec[pathArgs]})
	if strictOf(loose) {
		t.Errorf("NotStrict tool sent %s", loose.Definition())
	}
	type mapArgs struct {
		Labels map[string]string `json:"labels"`
	}
	if _, err := tools.New(tools.Def[mapArgs]{Spec: tools.Spec{Name: "c", Description: "d"}, Execute: okExec[mapArgs]}); err == nil ||
		!strings.Contains(err.Error(), "NotStrict") {
		t.Errorf("a map field without NotStrict: err = %v, want one asking for the reason", err)
	}
	if m, err := tools.New(tools.Def[mapArgs]{Spec: tools.Spec{Name: "c", Description: "d", NotStrict: "labels is a map, which strict mode cannot express"}, Execute: okExec[mapArgs]}); err != nil || strictOf(m) {
		t.Errorf("a map field with NotStrict: %v", err)
	}
	type openArgs struct {
		Schema json.RawMessage `json:"schema" jsonschema:"type=object"`
	}
	if _, err := tools.New(tools.Def[openArgs]{Spec: tools.Spec{Name: "o", Description: "d"}, Execute: okExec[openArgs]}); err == nil ||
		!strings.Contains(err.Error(), "open object at #/properties/schema") {
		t.Errorf("an open object field without NotStrict: err = %v, want one naming it", err)
	}
	raw := json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)
	if r := tools.Must(tools.Def[pathArgs]{Spec: tools.Spec{Name: "d", Description: "d", JSONSchema: raw}, Execute: okExec[pathArgs]}); strictOf(r) {
		t.Errorf("raw schema sent strict without Strict: %s", r.Definition())
	}
	if _, err := tools.New(tools.Def[pathArgs]{Spec: tools.Spec{Name: "e", Description: "d", Strict: true, NotStrict: "x"}, Execute: okExec[pathArgs]}); err == nil {
		t.Error("Strict and NotStrict at once accepted")
	}
}
