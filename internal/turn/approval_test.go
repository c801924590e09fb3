package turn_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
)

type noParams struct{}

func policyTool(ns, name string, destructive, readOnly bool) *tools.Tool {
	return tools.Must(tools.Def[noParams]{
		Spec:    tools.Spec{Name: name, Namespace: ns, Description: "t", Destructive: destructive, ReadOnly: readOnly},
		Execute: func(context.Context, noParams) (tools.Result, error) { return tools.Result{}, nil },
	})
}

func TestPolicy(t *testing.T) {
	rm := policyTool("", "run_command", true, false)
	read := policyTool("", "read_file", false, true)
	del := policyTool("github", "delete_issue", false, false)
	list := policyTool("github", "list_issues", false, true)
	other := policyTool("files", "delete_issue", false, false)
	set, err := turn.NewSet(rm, read, del, list, other)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag  string
		scope protocol.ApprovalScope
		want  []string
	}{
		{"none", protocol.ApprovalScope{}, nil},
		{"", protocol.ApprovalScope{}, nil},
		{"destructive", protocol.ApprovalScope{}, []string{"run_command"}},
		{"none", protocol.ApprovalScope{Level: "destructive"}, []string{"run_command"}},
		{"all", protocol.ApprovalScope{}, []string{"run_command", "read_file", "github.delete_issue", "github.list_issues", "files.delete_issue"}},
		{"github.*", protocol.ApprovalScope{}, []string{"github.delete_issue", "github.list_issues"}},
		{"github.delete_issue", protocol.ApprovalScope{}, []string{"github.delete_issue"}},
		// A bare name is a tool without a namespace.
		{"delete_issue", protocol.ApprovalScope{}, nil},
		{"read_file, destructive", protocol.ApprovalScope{}, []string{"run_command", "read_file"}},
		// The context only adds.
		{"destructive", protocol.ApprovalScope{Names: []string{"files.*"}}, []string{"run_command", "files.delete_issue"}},
		{"all", protocol.ApprovalScope{Names: []string{"read_file"}}, []string{"run_command", "read_file", "github.delete_issue", "github.list_issues", "files.delete_issue"}},
	} {
		p, err := turn.ParsePolicy(c.flag)
		if err != nil {
			t.Fatalf("%q: %v", c.flag, err)
		}
		if got := p.With(c.scope).Held(set); !slices.Equal(got, c.want) {
			t.Errorf("%q with %+v: %v, want %v", c.flag, c.scope, got, c.want)
		}
	}
	p, _ := turn.ParsePolicy("all,github.delete_issue")
	for tool, want := range map[*tools.Tool]string{rm: "destructive", del: "named", read: "all"} {
		if got := p.Reason(tool); got != want {
			t.Errorf("%s: reason %q, want %q", tool.Name(), got, want)
		}
	}
	// With never changes the policy it is called on.
	base, _ := turn.ParsePolicy("a,b")
	_ = base.With(protocol.ApprovalScope{Names: []string{"c"}})
	if !slices.Equal(base.Names, []string{"a", "b"}) {
		t.Errorf("With changed its receiver: %v", base.Names)
	}
	for _, bad := range []string{"x y", "a.b.c", "*", "ns.", "none,rm -rf"} {
		if _, err := turn.ParsePolicy(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPendingStepDecide(t *testing.T) {
	p := &turn.PendingStep{Step: 2, Calls: []turn.HeldCall{{CallID: "a", Approval: "named"}, {CallID: "b"}, {CallID: "c", Approval: "all"}}}
	ok := &protocol.Approval{Decisions: []protocol.Decision{{CallID: "c", Approved: true}, {CallID: "a"}}}
	if err := p.Decide(ok); err != nil {
		t.Errorf("a complete answer: %v", err)
	}
	for _, bad := range [][]protocol.Decision{
		{{CallID: "a"}},
		{{CallID: "a"}, {CallID: "c"}, {CallID: "b"}}, // b needs no approval
		{{CallID: "a"}, {CallID: "c"}, {CallID: "z"}},
	} {
		if err := p.Decide(&protocol.Approval{Decisions: bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if ev := p.Event(); len(ev.Approvals) != 2 || ev.Approvals[0].CallID != "a" || ev.Approvals[1].CallID != "c" {
		t.Errorf("event %+v", ev)
	}
}
