package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// BenchmarkStep is one step with one call against a real worker, first
// in a fresh turn, then in a turn with many steps before it: a run reads
// the turn's events from the start of the stream (so that a re-sent step
// finds the events of the first send), which costs more as turns grow.
func BenchmarkStep(b *testing.B) {
	for _, before := range []int{0, 200} {
		b.Run(fmt.Sprintf("after_%d_steps", before), func(b *testing.B) {
			r := newRig(b)
			ctx := context.Background()
			turns, steps := 0, map[string]int64{}
			step := func(turnID string) {
				n := steps[turnID]
				steps[turnID]++
				run, err := r.c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turnID, Step: n, Context: diagCtx,
					Output: []json.RawMessage{fc(fmt.Sprint("c", n), "ping", `{}`)}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := run.Wait(ctx); err != nil {
					b.Fatal(err)
				}
				run.Close()
			}
			for range before {
				step("long")
			}
			for b.Loop() {
				if before == 0 {
					turns++
					step(fmt.Sprint("t", turns))
				} else {
					step("long")
				}
			}
		})
	}
}
