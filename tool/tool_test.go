package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/tool"
)

type moveParams struct {
	From  string `json:"from" jsonschema:"maxLength=20"`
	To    string `json:"to"`
	Count int    `json:"count,omitempty" jsonschema:"minimum=1"`
}

func moveTool(t testing.TB, sp tool.Spec) *tool.Tool {
	t.Helper()
	sp.Name, sp.Description = "move", "Move a file."
	return tool.Must(tool.Def[moveParams]{Spec: sp,
		Activity:          func(p moveParams) string { return "Moving " + p.From },
		CompletedActivity: func(p moveParams, r tool.Result) string { return "Moved " + p.From + ": " + r.Content },
		Execute: func(_ context.Context, p moveParams) (tool.Result, error) {
			if p.From == "panic" {
				panic("boom")
			}
			return tool.Result{Content: p.From + "→" + p.To}, nil
		}})
}

// Parse is the worker's check of the arguments: repaired, validated and
// decoded, or refused with what is wrong, before the tool runs.
func TestParse(t *testing.T) {
	tl := moveTool(t, tool.Spec{})
	a, repairs, err := tl.Parse(`{'from': 'a', 'to': 'b',}`, 0)
	if err != nil || strings.Join(repairs, ",") != "trailing_commas,single_quotes" || a.Activity != "Moving a" {
		t.Fatalf("%+v, %v, %v", a, repairs, err)
	}
	res, err := a.Run(context.Background())
	if err != nil || res.Content != "a→b" || a.Completed(res) != "Moved a: a→b" {
		t.Errorf("%+v, %v, %q", res, err, a.Completed(res))
	}
	if a, _, err := tl.Parse(`{"from":"a","to":"b","x":1}`, 0); err == nil || a != nil {
		t.Errorf("%+v, %v; want refused", a, err)
	}
	// A repair beyond the limit is not tried.
	if _, _, err := tl.Parse(`{'from': 'a', 'to': 'b'}`, 8); err == nil {
		t.Error("repaired beyond the limit")
	}
	// Run leaves a panic to the caller (the worker recovers it).
	a, _, _ = tl.Parse(`{"from":"panic","to":"b"}`, 0)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	_, _ = a.Run(context.Background())
}

// Released arguments are reused by later Parses, through both paths
// (direct, and repaired then bound), and what the tool was given stays
// its own: the parameters are copies, and a field a later call leaves out
// is not the earlier call's.
func TestArgsRelease(t *testing.T) {
	type listParams struct {
		Items []string `json:"items"`
		Note  string   `json:"note,omitempty"`
	}
	var got []listParams
	tl := tool.Must(tool.Def[listParams]{Spec: tool.Spec{Name: "list", Description: "Lists."},
		Execute: func(_ context.Context, p listParams) (tool.Result, error) {
			got = append(got, p)
			return tool.Result{Content: strings.Join(p.Items, ",") + p.Note}, nil
		}})
	for i, args := range []string{
		`{"items":["a","b"],"note":"!"}`,
		`{"items":["c"]}`,
		`{'items': ['d', 'e', 'f'],}`, // repaired: the bind path
		`{"items":[]}`,
	} {
		a, _, err := tl.Parse(args, 0)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if _, err := a.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Release()
		if _, _, err := tl.Parse(`{"items":"not a list"}`, 0); err == nil { // refused, and released
			t.Fatalf("call %d: a string for a list was taken", i)
		}
	}
	want := []listParams{{Items: []string{"a", "b"}, Note: "!"}, {Items: []string{"c"}}, {Items: []string{"d", "e", "f"}}, {Items: []string{}}}
	if len(got) != len(want) {
		t.Fatalf("%d runs", len(got))
	}
	for i := range want {
		if strings.Join(got[i].Items, ",") != strings.Join(want[i].Items, ",") || got[i].Note != want[i].Note {
			t.Errorf("run %d got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// Validate returns what the tool would run with: the arguments as sent
// when they needed nothing, the repaired value otherwise.
func TestValidate(t *testing.T) {
	tl := moveTool(t, tool.Spec{})
	for args, want := range map[string]string{
		` {"to":"b", "from":"a"} `:                    `{"to":"b", "from":"a"}`,
		"```json\n{\"from\":\"a\",\"to\":\"b\"}\n```": `{"from":"a","to":"b"}`,
	} {
		got, _, err := tl.Validate(args, 0)
		if err != nil || string(got) != want {
			t.Errorf("%q: %s, %v; want %s", args, got, err, want)
		}
	}
	if got, _, err := tl.Validate(`{"from":1,"to":"b"}`, 0); err == nil || got != nil {
		t.Errorf("%s, %v", got, err)
	}
	if !json.Valid(tl.Schema()) || !strings.Contains(string(tl.Definition()), string(tl.Schema())) {
		t.Errorf("schema %s, definition %s", tl.Schema(), tl.Definition())
	}
}

// A call context answers CallFrom and ReportProgress; a second one
// inside it with only a progress receiver, or only a call, keeps the
// other of the first.
func TestCallContext(t *testing.T) {
	if _, ok := tool.CallFrom(context.Background()); ok || tool.ProgressWanted(context.Background()) {
		t.Fatal("a call outside a call context")
	}
	tool.ReportProgress(context.Background(), 1, 2, "nobody listens")
	var got []string
	c := tool.Call{AgentID: "a1", TurnID: "t1", Step: 2, CallID: "c9"}
	outer := &tool.CallContext{Context: context.Background(), Call: c}
	inner := &tool.CallContext{Context: outer, Progress: func(done, total int64, label string) { got = append(got, label) }}
	if cc, ok := tool.CallFrom(inner); !ok || cc != c || !tool.ProgressWanted(inner) || tool.ProgressWanted(outer) {
		t.Errorf("%+v %v", cc, ok)
	}
	tool.ReportProgress(inner, 1, 2, "half")
	second := &tool.CallContext{Context: inner, Call: tool.Call{CallID: "c10"}}
	tool.ReportProgress(second, 2, 2, "done")
	if cc, _ := tool.CallFrom(second); cc.CallID != "c10" || strings.Join(got, ",") != "half,done" {
		t.Errorf("%+v, %v", cc, got)
	}
}

func TestCategoryValidate(t *testing.T) {
	tl := moveTool(t, tool.Spec{})
	for _, c := range []tool.Category{
		{Name: "", Tools: tool.NewCategory("x", tl).Tools},
		{Name: "Bad-Name", Tools: tool.NewCategory("x", tl).Tools},
		{Name: "ok"},
	} {
		if c.Validate() == nil {
			t.Errorf("%q: no error", c.Name)
		}
	}
	if err := tool.NewCategory("move_tools", tl).Validate(); err != nil {
		t.Error(err)
	}
}
