package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

type storeParams struct {
	Doc json.RawMessage `json:"doc"`
}

// TestApprovalDeepestArgumentsAreDecidedAndRun: a held step whose call
// has the deepest arguments validation accepts (schema.MaxDepth levels)
// is announced, reread when its answer comes, decided and run with the
// value shown, over real NATS; one level more is refused at validation
// with invalid_arguments and a bounded message, and the step ends (a
// value of 10,000 levels once made the pending record unreadable and the
// step never ended).
func TestApprovalDeepestArgumentsAreDecidedAndRun(t *testing.T) {
	t.Parallel()
	got := make(chan json.RawMessage, 4)
	store := tool.Must(tool.Def[storeParams]{
		Spec: tool.Spec{Name: "store", Description: "Store a JSON document.", ExecutionMode: tool.Sequential,
			JSONSchema: json.RawMessage(`{"type":"object","properties":{"doc":{}},"required":["doc"]}`)},
		Execute: func(_ context.Context, p storeParams) (tool.Result, error) {
			got <- p.Doc
			return tool.Result{Content: "stored"}, nil
		},
	})
	s := newApprovalRigWith(t, turn.Policy{Names: []string{"store"}}, tool.NewCategory(diagnostics.Binding, store))
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	doc := nest(schema.MaxDepth - 1) // inside the arguments' object: MaxDepth levels
	args := `{"doc": ` + doc + `}`

	ev := s.g.watch("a1", "deep")
	s.g.sendStep("a1", "deep", 0, fc("c1", "store", args))
	p := pendingEvent(t, ev, "a1", "deep", 0)
	if len(p.Approvals) != 1 || string(p.Approvals[0].Arguments) != `{"doc":`+doc+`}` {
		t.Fatalf("approvals %d, arguments %.80s…", len(p.Approvals), p.Approvals[0].Arguments)
	}
	s.answer("a1", "deep", 0, protocol.ApprovalMsgID("a1", "deep", 0, 1), protocol.Decision{CallID: "c1", Approved: true})
	outs, _ := ev.untilDone()
	if outs["c1"].Status != "ok" {
		t.Fatalf("c1: %+v", outs["c1"])
	}
	if d := string(<-got); d != doc {
		t.Errorf("the tool received %.80s…, not the %d levels shown", d, schema.MaxDepth-1)
	}

	// One level more, and far more: refused before anything is held.
	for i, n := range []int{schema.MaxDepth, 9999} {
		turnID := []string{"deeper", "deepest"}[i]
		ev := s.g.watch("a1", turnID)
		s.g.sendStep("a1", turnID, 0, fc("c1", "store", `{"doc": `+nest(n)+`}`))
		outs, _ := ev.untilDone()
		e := outs["c1"]
		if errKind(e) != "invalid_arguments" || !strings.Contains(e.Error.Message, "more than 512 levels") || len(e.Error.Message) > 4096 {
			t.Errorf("%d levels: %+v", n+1, e.Error)
		}
	}
	if len(got) != 0 {
		t.Errorf("a refused call ran")
	}
}

// newApprovalRigWith is newApprovalRig with more categories.
func newApprovalRigWith(t *testing.T, policy turn.Policy, categories ...tool.Category) *approvalRig {
	t.Helper()
	s := natstest.Start(t)
	r := &approvalRig{t: t, s: s, markDir: t.TempDir()}
	cfg := testConfig()
	cfg.Approval = policy
	startWorker(t, s, cfg, append([]tool.Category{diagnostics.Category(diagnostics.Config{MarkDir: r.markDir})}, categories...)...)
	r.g = newGateway(t, s)
	return r
}
