package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

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

func okExec[P any](_ context.Context, _ P) (tool.Result, error) {
	return tool.Result{Content: "ok"}, nil
}

// counted wraps a tool body to count its runs.
func counted[P any](n *atomic.Int32, f func(P) string) func(context.Context, P) (tool.Result, error) {
	return func(_ context.Context, p P) (tool.Result, error) {
		n.Add(1)
		return tool.Result{Content: f(p)}, nil
	}
}

func TestPrepare(t *testing.T) {
	var runs atomic.Int32
	search := tool.Must(tool.Def[searchArgs]{
		Spec:    tool.Spec{Name: "web_search", Description: "Search.", ReadOnly: true},
		Execute: counted(&runs, func(p searchArgs) string { return fmt.Sprintf("%s/%d/%s/%v", p.Query, p.Limit, p.Sort, p.Sites) }),
	})
	opts := tool.Must(tool.Def[noArgs]{
		Spec:    tool.Spec{Name: "status", Description: "Status.", ReadOnly: true},
		Execute: counted(&runs, func(p noArgs) string { return fmt.Sprintf("verbose=%v", p.Verbose) }),
	})
	del := tool.Must(tool.Def[pathArgs]{
		Spec:    tool.Spec{Name: "delete_file", Description: "Delete.", Destructive: true},
		Execute: counted(&runs, func(p pathArgs) string { return "deleted " + p.Path }),
	})
	tests := []struct {
		name    string
		tool    *tool.Tool
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
				var te *tool.Error
				if !errors.As(err, &te) || te.Kind != tool.InvalidArguments {
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
	tl := tool.Must(tool.Def[pathArgs]{
		Spec: tool.Spec{Name: "big", Description: "d",
			JSONSchema: json.RawMessage(`{"type":"object","description":"` + long + `","properties":{"path":{"type":"string"}},"required":["path"]}`)},
		Execute: okExec[pathArgs],
	})
	_, err := tools.Prepare(tl, `{}`, 0)
	var te *tool.Error
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
	tl := tool.Must(tool.Def[pathArgs]{
		Spec:    tool.Spec{Name: "odd", Description: "d", JSONSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"integer"}}}`)},
		Execute: okExec[pathArgs],
	})
	_, err := tools.Prepare(tl, `{"path":3}`, 0)
	var te *tool.Error
	if !errors.As(err, &te) || te.Kind != tool.InvalidArguments || !strings.Contains(te.Message, "do not fit") {
		t.Errorf("Prepare = %v, want invalid_arguments saying the arguments do not fit", err)
	}
}

func TestStrictNullsReachTheToolAsAbsent(t *testing.T) {
	type args struct {
		Query string `json:"query"`
		Limit *int   `json:"limit,omitempty" jsonschema:"minimum=1"`
	}
	var got args
	tl := tool.Must(tool.Def[args]{
		Spec: tool.Spec{Name: "s", Description: "d", Strict: true},
		Execute: func(_ context.Context, p args) (tool.Result, error) {
			got = p
			return tool.Result{}, nil
		},
	})
	inv, err := tools.Prepare(tl, `{"query":"go","limit":null}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inv.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.Query != "go" || got.Limit != nil {
		t.Errorf("tool got %+v", got)
	}
	if _, err := tools.Prepare(tl, `{"query":"go","limit":0}`, 0); err == nil {
		t.Error("a strict tool accepted a value below its minimum")
	}
}

func TestRun(t *testing.T) {
	run := func(f func(context.Context, pathArgs) (tool.Result, error)) (tool.Result, error) {
		tl := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "t", Description: "d"}, Execute: f})
		inv, err := tools.Prepare(tl, `{"path":"/x"}`, 0)
		if err != nil {
			t.Fatal(err)
		}
		return inv.Run(context.Background())
	}
	kindOf := func(err error) tool.Kind {
		var te *tool.Error
		if !errors.As(err, &te) {
			return ""
		}
		return te.Kind
	}

	t.Run("success", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tool.Result, error) {
			return tool.Result{Content: "done", EndTurn: true, Details: map[string]int{"n": 1}}, nil
		})
		if err != nil || res.Content != "done" || !res.EndTurn {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("panic becomes tool_error", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tool.Result, error) { panic("disk on fire") })
		if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "disk on fire") {
			t.Errorf("Run error = %v, want tool_error with the panic value", err)
		}
		d, _ := res.Details.(map[string]string)
		if d["panic"] != "disk on fire" || !strings.Contains(d["stack"], "tool_test.go") {
			t.Errorf("Details = %v, want the panic and its stack", res.Details)
		}
	})
	t.Run("nil panic becomes tool_error", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tool.Result, error) { panic(nil) })
		if kindOf(err) != tool.ToolError {
			t.Errorf("Run error = %v, want tool_error", err)
		}
	})
	t.Run("plain error becomes tool_error", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tool.Result, error) {
			return tool.Result{}, errors.New("no such file")
		})
		var te *tool.Error
		if !errors.As(err, &te) || te.Kind != tool.ToolError || te.Message != "no such file" {
			t.Errorf("Run error = %#v, want tool_error \"no such file\"", err)
		}
	})
	t.Run("coded error kept", func(t *testing.T) {
		want := tool.Errorf(tool.InvalidArguments, "path %s is not a file", "/x")
		_, err := run(func(context.Context, pathArgs) (tool.Result, error) { return tool.Result{}, want })
		if err != want {
			t.Errorf("Run error = %v, want the tool's own *Error", err)
		}
	})
	t.Run("wrapped coded error kept", func(t *testing.T) {
		_, err := run(func(context.Context, pathArgs) (tool.Result, error) {
			return tool.Result{}, fmt.Errorf("fetching: %w", tool.Errorf(tool.Timeout, "upstream slow"))
		})
		if kindOf(err) != tool.Timeout {
			t.Errorf("Run error = %v, want kind timeout", err)
		}
	})
	t.Run("content kept with an error", func(t *testing.T) {
		res, err := run(func(context.Context, pathArgs) (tool.Result, error) {
			return tool.Result{Content: "partial"}, errors.New("boom")
		})
		if res.Content != "partial" || err == nil {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("context reaches the tool", func(t *testing.T) {
		tl := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "t", Description: "d"},
			Execute: func(ctx context.Context, _ pathArgs) (tool.Result, error) {
				c, ok := tool.CallFrom(ctx)
				if !ok {
					return tool.Result{}, errors.New("no call in context")
				}
				return tool.Result{Content: fmt.Sprintf("%s/%s/%d/%s", c.AgentID, c.TurnID, c.Step, c.CallID)}, nil
			}})
		inv, _ := tools.Prepare(tl, `{"path":"/"}`, 0)
		ctx := tools.WithCall(context.Background(), tool.Call{AgentID: "a1", TurnID: "t1", Step: 2, CallID: "c9"})
		res, err := inv.Run(ctx)
		if err != nil || res.Content != "a1/t1/2/c9" {
			t.Errorf("Run = %q, %v", res.Content, err)
		}
	})
}

func TestActivity(t *testing.T) {
	both := tool.Must(tool.Def[pathArgs]{
		Spec:     tool.Spec{Name: "read", Description: "d", ReadOnly: true},
		Activity: func(p pathArgs) string { return "Reading " + p.Path },
		CompletedActivity: func(p pathArgs, r tool.Result) string {
			return fmt.Sprintf("Read %s (%d bytes)", p.Path, len(r.Content))
		},
		Execute: func(context.Context, pathArgs) (tool.Result, error) { return tool.Result{Content: "hello"}, nil },
	})
	startOnly := tool.Must(tool.Def[pathArgs]{
		Spec:     tool.Spec{Name: "stat", Description: "d", ReadOnly: true},
		Activity: func(p pathArgs) string { return "Checking " + p.Path },
		Execute:  okExec[pathArgs],
	})
	none := tool.Must(tool.Def[pathArgs]{Spec: tool.Spec{Name: "quiet", Description: "d"}, Execute: okExec[pathArgs]})
	tests := []struct {
		tool           *tool.Tool
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
