package turn_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

type noParams struct{}

func policyTool(ns, name string, destructive, readOnly bool) *tool.Tool {
	return tool.Must(tool.Def[noParams]{
		Spec:    tool.Spec{Name: name, Namespace: ns, Description: "t", Destructive: destructive, ReadOnly: readOnly},
		Execute: func(context.Context, noParams) (tool.Result, error) { return tool.Result{}, nil },
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
		// A level in a context's list holds what it holds in the flag's:
		// a gateway that writes ["destructive", "files.*"] gets both.
		{"none", protocol.ApprovalScope{Names: []string{"destructive", "files.*"}}, []string{"run_command", "files.delete_issue"}},
		{"none", protocol.ApprovalScope{Names: []string{"all"}}, []string{"run_command", "read_file", "github.delete_issue", "github.list_issues", "files.delete_issue"}},
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
	for tool, want := range map[*tool.Tool]string{rm: "destructive", del: "named", read: "all"} {
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

// memApprovals keeps pending steps in memory.
type memApprovals struct {
	held      map[int64]*turn.PendingStep
	announced int
}

func (m *memApprovals) Hold(_ context.Context, p *turn.PendingStep) (*turn.PendingStep, error) {
	if had := m.held[p.Step]; had != nil {
		return had, nil
	}
	m.held[p.Step] = p
	return nil, nil
}

func (m *memApprovals) Announce(context.Context, *turn.PendingStep) error {
	m.announced++
	return nil
}

// TestHeldStepRunsTheStoredArguments: a held step runs nothing; once
// decided it runs the stored validated value, whatever the model's text
// says, and answers a refused call rejected.
func TestHeldStepRunsTheStoredArguments(t *testing.T) {
	var got []string
	echo := func(_ context.Context, p textArgs) (tool.Result, error) {
		got = append(got, p.Text)
		return tool.Result{Content: "ran " + p.Text}, nil
	}
	r, em, _ := newRunner(t, newTool(t, "write", tool.Sequential, echo), newTool(t, "read", tool.Parallel, echo, readOnly))
	ap := &memApprovals{held: map[int64]*turn.PendingStep{}}
	r.Approval, r.Approvals = turn.Policy{Names: []string{"write"}}, ap
	st := step(0, call("c1", "write", `{"text":"model",}`), call("c2", "read", `{"text":"r"}`), call("c3", "write", `{"text":"other"}`), call("c4", "nope", `{}`))
	if err := r.Run(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), st); err != nil { // a redelivery
		t.Fatal(err)
	}
	if len(got) != 0 || len(em.outputs) != 0 || len(em.done) != 0 || ap.announced != 2 {
		t.Fatalf("a held step ran %v, published %d outputs and %d step.done, announced %d times", got, len(em.outputs), len(em.done), ap.announced)
	}
	p := ap.held[0]
	if ev := p.Event(); len(ev.Approvals) != 2 || string(ev.Approvals[0].Arguments) != `{"text":"model"}` || ev.Approvals[0].Activity != "Running write" {
		t.Fatalf("step.pending %+v", ev)
	}
	if p.Calls[3].Outcome == nil || p.Calls[3].Outcome.Err.Kind != tool.UnknownTool {
		t.Errorf("the unknown tool's call is not answered in the record: %+v", p.Calls[3])
	}
	// What was shown is what runs: the stored value, not the model's text.
	p.Calls[0].Valid = []byte(`{"text":"shown"}`)
	p.State, p.Resolution = turn.StateDecided, &turn.Resolution{By: turn.ByAnswer, Decisions: []protocol.Decision{{CallID: "c1", Approved: true}, {CallID: "c3", Reason: "no"}}}
	if err := r.Resolve(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"shown", "r"}) {
		t.Errorf("ran %v", got)
	}
	if o := em.output("c1"); o == nil || o.Status != "ok" || !slices.Equal(o.Repairs, []string{"trailing_commas"}) {
		t.Errorf("c1 %+v", o)
	}
	if o := em.output("c3"); o == nil || o.Error == nil || o.Error.Kind != tool.Rejected {
		t.Errorf("c3 %+v", o)
	}
	if o := em.output("c4"); o == nil || o.Error == nil || o.Error.Kind != tool.UnknownTool {
		t.Errorf("c4 %+v", o)
	}
	if len(em.done) != 1 || len(em.done[0].Items) != 4 || em.done[0].EndTurn {
		t.Errorf("step.done %+v", em.done)
	}
}

// decideAll approves every held call of the step held in ap.
func decideAll(ap *memApprovals, n int64) *turn.PendingStep {
	p := ap.held[n]
	var ds []protocol.Decision
	for _, c := range p.Calls {
		if c.Approval != "" {
			ds = append(ds, protocol.Decision{CallID: c.CallID, Approved: true})
		}
	}
	p.State, p.Resolution = turn.StateDecided, &turn.Resolution{By: turn.ByAnswer, Decisions: ds}
	return p
}

// TestApprovedMediaKeepTheirNotesInStepDone: an approved call's media
// output reaches step.done with its notes, as a step that was never held
// does, so that a step.done too large for one event replaces each medium
// by what its own note says.
func TestApprovedMediaKeepTheirNotesInStepDone(t *testing.T) {
	shot := mediaTool(t, "shot", "A screenshot.", tool.Media{MIMEType: "image/png", Data: tinyPNG(t, 2, 2, false), Source: "shots/a.png in your home"})
	r, em, _ := newRunner(t, shot)
	if err := r.Run(context.Background(), step(0, call("c1", "shot", `{"text":"x"}`))); err != nil {
		t.Fatal(err)
	}
	ap := &memApprovals{held: map[int64]*turn.PendingStep{}}
	r.Approval, r.Approvals = turn.Policy{Names: []string{"shot"}}, ap
	if err := r.Run(context.Background(), step(1, call("c2", "shot", `{"text":"x"}`))); err != nil {
		t.Fatal(err)
	}
	if err := r.Resolve(context.Background(), decideAll(ap, 1)); err != nil {
		t.Fatal(err)
	}
	if len(em.done) != 2 || len(em.done[0].MediaNotes) != 1 || len(em.done[0].MediaNotes[0]) == 0 {
		t.Fatalf("step.done events %+v", em.done)
	}
	if len(em.done[1].MediaNotes) != 1 || !slices.Equal(em.done[1].MediaNotes[0], em.done[0].MediaNotes[0]) {
		t.Errorf("the approved call's step.done has notes %q, the step never held %q", em.done[1].MediaNotes, em.done[0].MediaNotes)
	}
}

// TestApprovedDeferredCallRunsAfterItsLoadExpired: a held call of a
// deferred tool was loaded when it was held (otherwise it is answered
// not_loaded and never offered); the loaded set may leave TURN_STATE
// with its TTL while the person decides, which must not turn the
// approved call into not_loaded.
func TestApprovedDeferredCallRunsAfterItsLoadExpired(t *testing.T) {
	var ran int
	mail := newTool(t, "mail", tool.Sequential, func(context.Context, textArgs) (tool.Result, error) {
		ran++
		return tool.Result{Content: "sent"}, nil
	}, deferred, describe("Send an email."))
	r, em, st := newRunner(t, mail)
	ap := &memApprovals{held: map[int64]*turn.PendingStep{}}
	r.Approval, r.Approvals = turn.Policy{Names: []string{"mail"}}, ap
	if err := st.AddLoaded(context.Background(), "a1", "t1", []string{"mail"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background(), step(1, call("c1", "mail", `{"text":"hi"}`))); err != nil {
		t.Fatal(err)
	}
	if p := ap.held[1]; p == nil || p.Calls[0].Approval == "" {
		t.Fatalf("not held: %+v", p)
	}
	st.mu.Lock()
	delete(st.loaded, "a1.t1") // the TTL took it
	st.mu.Unlock()
	if err := r.Resolve(context.Background(), decideAll(ap, 1)); err != nil {
		t.Fatal(err)
	}
	if o := em.output("c1"); o == nil || o.Status != "ok" || ran != 1 {
		t.Errorf("approved deferred call: %+v, ran %d times", o, ran)
	}
}
