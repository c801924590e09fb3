package tooltest_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
)

type echoParams struct {
	Text  string `json:"text" jsonschema:"maxLength=100"`
	Times int    `json:"times,omitempty" jsonschema:"minimum=1,maximum=3"`
}

func define(t *testing.T, sp tool.Spec, run func(context.Context, echoParams) (tool.Result, error)) *tool.Tool {
	t.Helper()
	if sp.Name == "" {
		sp.Name = "echo"
	}
	sp.Description = "Echo the text."
	tl, err := tool.New(tool.Def[echoParams]{Spec: sp, Execute: run})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func echo(_ context.Context, p echoParams) (tool.Result, error) {
	return tool.Result{Content: strings.Repeat(p.Text, max(p.Times, 1))}, nil
}

// The model's argument strings, hostile ones included: each is answered,
// and only valid (or losslessly repaired) ones reach the tool.
func TestCheckArguments(t *testing.T) {
	var ran atomic.Int32
	tl := define(t, tool.Spec{ReadOnly: true}, func(ctx context.Context, p echoParams) (tool.Result, error) {
		ran.Add(1)
		return echo(ctx, p)
	})
	for _, c := range []struct {
		args, output string
		kind         tool.Kind
		repairs      string
	}{
		{args: `{"text":"hi","times":2}`, output: "hihi"},
		{args: "```json\n{\"text\":\"hi\"}\n```", output: "hi", repairs: "strip_fences"},
		{args: `{'text': 'hi'}`, output: "hi", repairs: "single_quotes"},
		{args: `{"text":"hi","times":9}`, kind: tool.InvalidArguments},
		{args: `{"text":"hi","extra":1}`, kind: tool.InvalidArguments},
		{args: `{"text":"hi"`, kind: tool.InvalidArguments},
		{args: ``, kind: tool.InvalidArguments},
		{args: `[1,2]`, kind: tool.InvalidArguments},
		{args: `{"text":"` + strings.Repeat("x", 101) + `"}`, kind: tool.InvalidArguments},
		{args: `{"text":"hi"}{"text":"ho"}`, kind: tool.InvalidArguments},
		{args: "\x00\xff{", kind: tool.InvalidArguments},
	} {
		ran.Store(0)
		out := tooltest.Check(context.Background(), tl, c.args)
		if c.kind != "" {
			if out.Err == nil || out.Err.Kind != c.kind || ran.Load() != 0 {
				t.Errorf("%q: err %v, ran %d; want %s and no run", c.args, out.Err, ran.Load(), c.kind)
			}
			if !strings.HasPrefix(out.Output, "Error (invalid_arguments): The arguments for echo were rejected.") {
				t.Errorf("%q: the model reads %q", c.args, out.Output)
			}
			continue
		}
		if out.Err != nil || out.Output != c.output || strings.Join(out.Repairs, ",") != c.repairs {
			t.Errorf("%q: %q, %v, repairs %v", c.args, out.Output, out.Err, out.Repairs)
		}
	}
}

// A tool that fails in any way is an error output the model reads.
func TestCheckFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		spec tool.Spec
		run  func(context.Context, echoParams) (tool.Result, error)
		kind tool.Kind
		has  string
	}{
		{name: "plain error", run: func(context.Context, echoParams) (tool.Result, error) {
			return tool.Result{Content: "partial"}, errors.New("disk full")
		}, kind: tool.ToolError, has: "Error (tool_error): disk full\npartial"},
		{name: "coded error", run: func(context.Context, echoParams) (tool.Result, error) {
			return tool.Result{}, tool.Errorf(tool.Rejected, "not on weekends")
		}, kind: tool.Rejected, has: "Error (rejected): not on weekends"},
		{name: "wrapped coded error", run: func(context.Context, echoParams) (tool.Result, error) {
			return tool.Result{}, errors.Join(errors.New("context"), tool.Errorf(tool.InvalidArguments, "no such city"))
		}, kind: tool.InvalidArguments, has: "no such city"},
		{name: "panic", run: func(context.Context, echoParams) (tool.Result, error) {
			var m map[string]int
			m["x"] = 1
			return tool.Result{}, nil
		}, kind: tool.ToolError, has: "the tool failed unexpectedly: assignment to entry in nil map"},
		{name: "honours its time limit", spec: tool.Spec{Timeout: 20 * time.Millisecond}, run: func(ctx context.Context, _ echoParams) (tool.Result, error) {
			<-ctx.Done()
			return tool.Result{}, ctx.Err()
		}, kind: tool.Timeout, has: "did not finish within 20ms"},
		{name: "ignores its time limit", spec: tool.Spec{Timeout: 20 * time.Millisecond}, run: func(ctx context.Context, _ echoParams) (tool.Result, error) {
			select {} // hangs for good: the worker leaves it behind
		}, kind: tool.Timeout, has: "did not finish within 20ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := tooltest.Check(context.Background(), define(t, c.spec, c.run), `{"text":"hi"}`)
			if out.Err == nil || out.Err.Kind != c.kind || !strings.Contains(out.Output, c.has) {
				t.Errorf("err %v, output %q; want %s with %q", out.Err, out.Output, c.kind, c.has)
			}
		})
	}
}

// A tool New did not make is an error outcome, not a panic in the
// tool's test.
func TestCheckNoTool(t *testing.T) {
	for name, tl := range map[string]*tool.Tool{"nil": nil, "zero": new(tool.Tool)} {
		out := tooltest.Check(context.Background(), tl, `{"text":"hi"}`)
		if out.Err == nil || out.Err.Kind != tool.Internal || !strings.Contains(out.Output, "tool.New") {
			t.Errorf("%s: %+v", name, out)
		}
	}
}

// Cancelling the context is the turn's cancel: the running call is
// aborted.
func TestCheckCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	tl := define(t, tool.Spec{}, func(ctx context.Context, _ echoParams) (tool.Result, error) {
		close(started)
		<-ctx.Done()
		return tool.Result{}, ctx.Err()
	})
	go func() { <-started; cancel() }()
	if out := tooltest.Check(ctx, tl, `{"text":"hi"}`); out.Err == nil || out.Err.Kind != tool.Aborted {
		t.Errorf("got %v, %q", out.Err, out.Output)
	}
}

// The outcome is what the worker publishes: a function_call_output item,
// clipped to one event when the tool returns too much.
func TestCheckItem(t *testing.T) {
	huge := define(t, tool.Spec{Name: "huge"}, func(context.Context, echoParams) (tool.Result, error) {
		return tool.Result{Content: strings.Repeat("<é>", 300_000), Details: map[string]int{"n": 1}, EndTurn: true}, nil
	})
	out := tooltest.Checker{Call: tool.Call{CallID: "call_42"}}.Check(context.Background(), huge, `{"text":"x"}`)
	var item struct {
		Type   string `json:"type"`
		CallID string `json:"call_id"`
		Output string `json:"output"`
	}
	if err := json.Unmarshal(out.Item, &item); err != nil {
		t.Fatal(err)
	}
	if item.Type != "function_call_output" || item.CallID != "call_42" || item.Output != out.Output {
		t.Errorf("item %s…", out.Item[:100])
	}
	if len(out.Item) >= 1<<20 || !strings.HasPrefix(out.Output, "<é>") || !out.EndTurn {
		t.Errorf("item of %d bytes, end turn %v", len(out.Item), out.EndTurn)
	}
}

// Whatever the model sends, Check answers: the tool runs only on
// arguments that fit its schema, and anything else is invalid_arguments.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"text":"hi","times":2}`, `{"text":"hi",}`, "```json\n{\"text\":\"a\"}\n```", `{'text': 'x'}`, `{"text":"\ud800"}`, `{"text":1}`, `[]`, `null`, ``, `{{"text":"a"}}`, `"{\"text\":\"a\"}"`} {
		f.Add(s)
	}
	var bad atomic.Value
	tl := tool.Must(tool.Def[echoParams]{
		Spec: tool.Spec{Name: "echo", Description: "Echo the text.", ReadOnly: true},
		Execute: func(_ context.Context, p echoParams) (tool.Result, error) {
			if len([]rune(p.Text)) > 100 || p.Times < 0 || p.Times > 3 {
				bad.Store(p)
			}
			return tool.Result{Content: p.Text}, nil
		},
	})
	f.Fuzz(func(t *testing.T, args string) {
		out := tooltest.Check(context.Background(), tl, args)
		if v := bad.Load(); v != nil {
			t.Fatalf("the tool ran on %+v from %q", v, args)
		}
		if out.Err != nil && out.Err.Kind != tool.InvalidArguments {
			t.Fatalf("%q: %v", args, out.Err)
		}
		if !json.Valid(out.Item) {
			t.Fatalf("%q: item %q", args, out.Item)
		}
	})
}
