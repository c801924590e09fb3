package turn_test

import (
	"context"
	"testing"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// source stands in for names of namespace srv; "renamed" it answers with
// a tool of another name, "boom" with a panic.
type source struct{ t *testing.T }

func (s source) Unlisted(_ context.Context, namespace, name string) *tool.Tool {
	switch {
	case namespace != "srv":
		return nil
	case name == "boom":
		panic("boom")
	case name == "renamed":
		return newTool(s.t, "other", tool.Parallel, reply("renamed"), inNamespace("srv", ""))
	}
	return newTool(s.t, name, tool.Parallel, reply("stand-in for "+name), inNamespace("srv", ""))
}

// A call of a name the set does not hold goes to the Unlisted sources a
// category added while the set was assembled; a source cannot rename a
// call nor crash the step, and names no source owns stay unknown.
func TestUnlistedAnswersNamesTheSetDoesNotHold(t *testing.T) {
	listed := newTool(t, "listed", tool.Parallel, reply("listed"), inNamespace("srv", ""))
	c := tool.Category{Name: "c", Tools: func(ctx context.Context, _ tool.Turn) ([]*tool.Tool, error) {
		turn.AddUnlisted(ctx, source{t})
		return []*tool.Tool{listed}, nil
	}}
	set, err := turn.NewAssembler(c).Assemble(context.Background(), env())
	if err != nil {
		t.Fatal(err)
	}
	if got := names(set.Tools()); len(got) != 1 || got[0] != "srv.listed" {
		t.Fatalf("catalog %q: a source adds nothing to it", got)
	}
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(
		nsCall("c1", "srv", "listed", `{"text":"x"}`),
		nsCall("c2", "srv", "anything", `{"text":"x"}`),
		nsCall("c3", "srv", "renamed", `{"text":"x"}`),
		nsCall("c4", "srv", "boom", `{"text":"x"}`),
		nsCall("c5", "elsewhere", "anything", `{"text":"x"}`),
		call("c6", "anything", `{"text":"x"}`),
	))
	o := res.Outcomes
	if output(t, o[0]) != "listed" || output(t, o[1]) != "stand-in for anything" {
		t.Fatalf("outputs %q, %q", output(t, o[0]), output(t, o[1]))
	}
	for _, i := range []int{2, 3, 4, 5} {
		if kind(o[i]) != tool.UnknownTool {
			t.Fatalf("call %s: kind %q, want unknown_tool", o[i].CallID, kind(o[i]))
		}
	}

	// A set not made by Assemble has no sources; adding one outside
	// Assemble does nothing.
	turn.AddUnlisted(context.Background(), source{t})
	res = dispatch(t, context.Background(), &turn.Dispatcher{}, mustSet(t, listed), input(nsCall("c1", "srv", "anything", `{"text":"x"}`)))
	if kind(res.Outcomes[0]) != tool.UnknownTool {
		t.Fatalf("kind %q, want unknown_tool", kind(res.Outcomes[0]))
	}
}
