package catalog_test

import (
	"context"
	"testing"

	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

func TestHints(t *testing.T) {
	mk := func(name string, ro, destructive bool) *tool.Tool {
		return tool.Must(tool.Def[struct{}]{Spec: tool.Spec{Name: name, Description: "d", ReadOnly: ro, Destructive: destructive},
			Execute: func(context.Context, struct{}) (tool.Result, error) { return tool.Result{}, nil }})
	}
	set, err := turn.NewSet(mk("look", true, false), mk("drop", false, true), mk("plain", false, false))
	if err != nil {
		t.Fatal(err)
	}
	h := catalog.Hints(set)
	want := map[string]protocol.ToolHints{"look": {ReadOnly: true}, "drop": {Destructive: true}}
	if len(h) != len(want) || h["look"] != want["look"] || h["drop"] != want["drop"] {
		t.Fatalf("hints %v, want %v", h, want)
	}
}
