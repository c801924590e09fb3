package toolhooks_test

import (
	"context"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/tool"
)

// A tool made by New carries its hooks, reached through Of; a zero Tool
// carries none.
func TestOf(t *testing.T) {
	type echoParams struct {
		Text string `json:"text"`
	}
	echo := tool.Must(tool.Def[echoParams]{
		Spec:     tool.Spec{Name: "echo", Description: "Echo.", ReadOnly: true},
		Activity: func(p echoParams) string { return "Echoing " + p.Text },
		Execute: func(_ context.Context, p echoParams) (tool.Result, error) {
			return tool.Result{Content: p.Text}, nil
		},
	})
	h := toolhooks.Of[tool.Result](echo)
	if h == nil || h.Params == nil || h.Bind == nil {
		t.Fatalf("hooks %+v", h)
	}
	v, _, err := h.Params.ParseValue(`{"text":"hi"}`, schema.RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.Bind(v)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Run(context.Background())
	if label, ok := a.Completed(res); err != nil || res.Content != "hi" || a.Activity() != "Echoing hi" || ok || label != "" {
		t.Errorf("%+v, %v, %q, %q %v", res, err, a.Activity(), label, ok)
	}
	a.Release()
	if h.Direct != nil && h.Direct(`{"text":`, nil) != nil {
		t.Error("Direct took arguments that do not parse")
	}
	if toolhooks.Of[tool.Result](&tool.Tool{}) != nil {
		t.Error("a zero Tool has hooks")
	}
}
