package turn_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// BenchmarkDispatchParallel8 is the dispatcher's own cost: one step of
// eight parallel calls of a no-op tool, no journal, no observer.
func BenchmarkDispatchParallel8(b *testing.B) {
	noop := newTool(b, "noop", tool.Parallel, func(context.Context, textArgs) (tool.Result, error) {
		return tool.Result{Content: "ok"}, nil
	}, readOnly)
	set := mustSet(b, noop)
	calls := make([]protocol.Call, 8)
	for i := range calls {
		calls[i] = call(fmt.Sprintf("call_%d", i), "noop", `{"text":"hello"}`)
	}
	in := turn.Input{AgentID: "a1", TurnID: "t1", Step: 0, Calls: calls}
	for _, bc := range []struct {
		name   string
		pool   *turn.Goroutines
		budget int
	}{{"go", nil, 0}, {"kept", turn.NewGoroutines(8), 0}, {"kept+budget", turn.NewGoroutines(8), protocol.EventBudget(1 << 20)}} {
		b.Run(bc.name, func(b *testing.B) {
			d := &turn.Dispatcher{Goroutines: bc.pool, MaxEventBytes: bc.budget}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res := d.Run(ctx, set, in)
				if res.Outcomes[7].Err != nil {
					b.Fatal(res.Outcomes[7].Err)
				}
			}
		})
	}
}
