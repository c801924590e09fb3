package tools

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

// Prepare is the worker's check of the arguments: repaired, validated
// and decoded, or refused with what is wrong, before the tool runs.
func TestPrepareRepairsAndDecodes(t *testing.T) {
	tl := moveTool(t, tool.Spec{})
	a, err := Prepare(tl, `{'from': 'a', 'to': 'b',}`, 0)
	if err != nil || strings.Join(a.Repairs, ",") != "trailing_commas,single_quotes" || a.Activity != "Moving a" {
		t.Fatalf("%+v, %v", a, err)
	}
	res, err := a.Run(context.Background())
	if err != nil || res.Content != "a→b" || a.CompletedActivity(res) != "Moved a: a→b" {
		t.Errorf("%+v, %v, %q", res, err, a.CompletedActivity(res))
	}
	if a, err := Prepare(tl, `{"from":"a","to":"b","x":1}`, 0); err == nil || a != nil {
		t.Errorf("%+v, %v; want refused", a, err)
	}
	// A repair beyond the limit is not tried.
	if _, err := Prepare(tl, `{'from': 'a', 'to': 'b'}`, 8); err == nil {
		t.Error("repaired beyond the limit")
	}
	// The tool's own Run leaves a panic to its caller (Invocation.Run
	// recovers it).
	a, _ = Prepare(tl, `{"from":"panic","to":"b"}`, 0)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	_, _ = a.args.Run(context.Background())
}

// Released arguments are reused by later Prepares, through both paths
// (direct, and repaired then bound), and what the tool was given stays
// its own: the parameters are copies, and a field a later call leaves out
// is not the earlier call's.
func TestRelease(t *testing.T) {
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
		a, err := Prepare(tl, args, 0)
		if err != nil {
			t.Fatalf("%s: %v", args, err)
		}
		if _, err := a.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.Release()
		if _, err := Prepare(tl, `{"items":"not a list"}`, 0); err == nil { // refused, and released
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
		got, _, err := Validate(tl, args, 0)
		if err != nil || string(got) != want {
			t.Errorf("%q: %s, %v; want %s", args, got, err, want)
		}
	}
	if got, _, err := Validate(tl, `{"from":1,"to":"b"}`, 0); err == nil || got != nil {
		t.Errorf("%s, %v", got, err)
	}
	if !json.Valid(tl.Schema()) || !strings.Contains(string(tl.Definition()), string(tl.Schema())) {
		t.Errorf("schema %s, definition %s", tl.Schema(), tl.Definition())
	}
}

// The error of a refused call names every violation with its JSON
// pointer, before argumentsError words it for the model.
func TestParseNamesEveryViolation(t *testing.T) {
	type lookupParams struct {
		Key    string `json:"key"`
		Shards []int  `json:"shards"`
	}
	lookup := tool.Must(tool.Def[lookupParams]{
		Spec: tool.Spec{Name: "lookup", Description: "Look a key up in some shards.", ReadOnly: true,
			JSONSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"key":    {"type": "string", "pattern": "^[a-z]+:[0-9]+$"},
					"shards": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 7}, "uniqueItems": true}
				},
				"required": ["key", "shards"]
			}`)},
		Execute: func(context.Context, lookupParams) (tool.Result, error) { return tool.Result{}, nil },
	})
	_, _, err := parse(lookup, `{"key": "user", "shards": [1, 9]}`, 0, nil)
	const want = "/key: does not match pattern '^[a-z]+:[0-9]+$'; /shards/1: must be <= 7 but found 9"
	if err == nil || err.Error() != want {
		t.Errorf("%v, want %s", err, want)
	}
}

// A parked invocation's storage is what its next Prepare of the same
// tool decodes into, emptied in between; another tool's Prepare gives it
// back to its tool instead, and a refusal gives it back too. A prepared
// invocation's parameters are never decoded into: they may still be in
// use.
func TestParkedStorageIsReused(t *testing.T) {
	move, other := moveTool(t, tool.Spec{}), moveTool(t, tool.Spec{})
	var inv Invocation
	if err := inv.Prepare(move, `{'from':'a','to':'b'}`, 0); err != nil || inv.Repairs == nil {
		t.Fatal(err, inv.Repairs)
	}
	first := inv.args
	inv.Park()
	if inv.args != first || inv.Tool != nil || inv.Repairs != nil || inv.Activity != "" {
		t.Fatalf("parked: %+v, want only the storage %p", inv, first)
	}
	if c := first.(interface{ Activity() string }); c.Activity() != "" {
		t.Errorf("parked storage keeps the label %q", c.Activity())
	}
	if err := inv.Prepare(move, `{"from":"c","to":"d"}`, 0); err != nil {
		t.Fatal(err)
	}
	if inv.args != first || inv.Tool != move || inv.Activity != "Moving c" {
		t.Errorf("same tool: storage %p, want %p; activity %q", inv.args, first, inv.Activity)
	}
	if err := inv.Prepare(move, `{"from":"e","to":"f"}`, 0); err != nil {
		t.Fatal(err)
	}
	if inv.args == first {
		t.Error("a prepared invocation's parameters were decoded into")
	}
	inv.Park()
	second := inv.args
	if err := inv.Prepare(other, `{"from":"e","to":"f"}`, 0); err != nil {
		t.Fatal(err)
	}
	if inv.args == second || inv.Tool != other {
		t.Errorf("another tool decoded into the storage of move")
	}
	inv.Park()
	if err := inv.Prepare(other, `{"from":1}`, 0); err == nil || inv.args != nil || inv.Tool != nil {
		t.Errorf("refusal: %v, left %+v", err, inv)
	}
	inv.Park() // nothing prepared: nothing to park
	if inv.args != nil || inv.Tool != nil {
		t.Errorf("Park of an unprepared invocation: %+v", inv)
	}
}

// Prepare over an invocation that holds another's fields (it writes
// only the fields that change) leaves none of them behind, and Reset
// empties it.
func TestPrepareOverAnother(t *testing.T) {
	tl := moveTool(t, tool.Spec{})
	plain := tool.Must(tool.Def[struct{}]{Spec: tool.Spec{Name: "plain", Description: "no label"},
		Execute: func(context.Context, struct{}) (tool.Result, error) { return tool.Result{}, nil }})
	var inv Invocation
	if err := inv.Prepare(tl, `{'from': 'a', 'to': 'b',}`, 0); err != nil || inv.Repairs == nil || inv.Activity == "" {
		t.Fatalf("%+v, %v", inv, err)
	}
	if err := inv.Prepare(plain, `{}`, 0); err != nil {
		t.Fatal(err)
	}
	if inv.Tool != plain || inv.Repairs != nil || inv.Activity != "" || inv.args == nil {
		t.Fatalf("fields of the first call left: %+v", inv)
	}
	inv.Reset()
	if inv.Tool != nil || inv.Repairs != nil || inv.Activity != "" || inv.args != nil {
		t.Fatalf("Reset left %+v", inv)
	}
}
