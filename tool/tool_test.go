package tool_test

import (
	"context"
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
