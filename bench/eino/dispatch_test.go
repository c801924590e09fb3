// Package eino compares the dispatch overhead per call of this runtime
// with cloudwego/eino's ToolsNode on the same step: eight parallel calls
// of a no-op tool. It is a separate module so that eino never enters the
// runtime's own dependencies. Run: go test -bench . -count 5 (in this
// directory).
package eino

import (
	"context"
	"fmt"
	"testing"

	einotool "github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/components/tool/utils"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

type noopParams struct {
	Note string `json:"note,omitempty"`
}

const calls = 8

// BenchmarkRuntimeDispatch8 runs the step as the worker does: on the
// dispatcher's kept goroutines (turn.NewGoroutines, which the worker
// always sets), so that a call's goroutine has its stack grown already.
func BenchmarkRuntimeDispatch8(b *testing.B) {
	runtimeDispatch8(b, &turn.Dispatcher{Goroutines: turn.NewGoroutines(calls)})
}

// BenchmarkRuntimeDispatch8Fresh is a zero Dispatcher: a new goroutine
// per call, as Eino's ToolsNode starts.
func BenchmarkRuntimeDispatch8Fresh(b *testing.B) {
	runtimeDispatch8(b, &turn.Dispatcher{})
}

func runtimeDispatch8(b *testing.B, d *turn.Dispatcher) {
	t := tool.Must(tool.Def[noopParams]{
		Spec: tool.Spec{Name: "noop", Description: "does nothing", ReadOnly: true},
		Execute: func(context.Context, noopParams) (tool.Result, error) {
			return tool.Result{Content: "ok"}, nil
		},
	})
	set, err := turn.NewSet(t)
	if err != nil {
		b.Fatal(err)
	}
	in := turn.Input{AgentID: "a", TurnID: "t"}
	for i := range calls {
		in.Calls = append(in.Calls, protocol.CallItem{Type: protocol.ItemFunctionCall, CallID: fmt.Sprintf("c%d", i), Name: "noop", Arguments: `{"note":"x"}`})
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res := d.Run(ctx, set, in)
		if len(res.Outcomes) != calls {
			b.Fatal("missing outcomes")
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}

func BenchmarkEinoToolsNode8(b *testing.B) {
	ctx := context.Background()
	noop, err := utils.InferTool("noop", "does nothing", func(_ context.Context, p *noopParams) (string, error) {
		return "ok", nil
	})
	if err != nil {
		b.Fatal(err)
	}
	node, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: []einotool.BaseTool{noop}})
	if err != nil {
		b.Fatal(err)
	}
	msg := &schema.Message{Role: schema.Assistant}
	for i := range calls {
		msg.ToolCalls = append(msg.ToolCalls, schema.ToolCall{ID: fmt.Sprintf("c%d", i), Type: "function",
			Function: schema.FunctionCall{Name: "noop", Arguments: `{"note":"x"}`}})
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := node.Invoke(ctx, msg)
		if err != nil || len(out) != calls {
			b.Fatal(err, len(out))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*calls), "ns/call")
}
