package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

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
	outer := &tools.CallContext{Context: context.Background(), Step: &tool.Call{AgentID: "a1", TurnID: "t1", Step: 2, CallID: "ignored"}, CallID: "c9"}
	inner := &tools.CallContext{Context: outer, Progress: func(done, total int64, label string) { got = append(got, label) }}
	if cc, ok := tool.CallFrom(inner); !ok || cc != c || !tool.ProgressWanted(inner) || tool.ProgressWanted(outer) {
		t.Errorf("%+v %v", cc, ok)
	}
	tool.ReportProgress(inner, 1, 2, "half")
	second := &tools.CallContext{Context: inner, CallID: "c10"}
	tool.ReportProgress(second, 2, 2, "done")
	if cc, _ := tool.CallFrom(second); cc.CallID != "c10" || strings.Join(got, ",") != "half,done" {
		t.Errorf("%+v, %v", cc, got)
	}
}
