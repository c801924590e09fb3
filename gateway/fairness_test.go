package gateway_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// Send checks context.fairness as the workers parse it: what they would
// dead-letter is refused with ErrMalformed and not published; what
// they accept is sent and run, and the step.done carries no trace of it.
func TestSendChecksFairnessLikeTheWorker(t *testing.T) {
	t.Parallel() // its own server
	r := newRig(t)
	refused := map[string]protocol.Fairness{
		"a space in the key":   {Key: "tenant 42"},
		"a key of 65":          {Key: strings.Repeat("k", 65)},
		"a weight below 0.01":  {Key: "t", Weight: 0.001},
		"a weight over 100":    {Weight: 100.5},
		"a negative weight":    {Weight: -1},
		"a weight that is NaN": {Weight: math.NaN()},
		"a slash in the key":   {Key: "a/b"},
	}
	for name, f := range refused {
		tc := diagCtx
		tc.Fairness = f
		_, err := r.c.Send(ctxT(t), protocol.Step{AgentID: "a1", TurnID: "tfr", Step: 0, Context: tc, Output: nil})
		if !errors.Is(err, protocol.ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	for i, f := range []protocol.Fairness{{}, {Key: "tenant-42"}, {Key: "team.a:prio_1", Weight: 0.01}, {Weight: 100}, {Key: strings.Repeat("k", protocol.MaxFairKey), Weight: 2.5}} {
		tc := diagCtx
		tc.Fairness = f
		turnID := "tfa" + string(rune('0'+i))
		if _, err := r.c.Catalog(ctxT(t), "a1", turnID, tc); err != nil {
			t.Fatalf("%+v: catalog: %v", f, err)
		}
		run, err := r.c.Send(ctxT(t), protocol.Step{AgentID: "a1", TurnID: turnID, Step: 0, Context: tc, Output: nil})
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		done, err := run.Wait(ctxT(t))
		run.Close()
		if err != nil || !done.EndTurn {
			t.Fatalf("%+v: step.done %+v, %v", f, done, err)
		}
	}
}
