package mcpdoor_test

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbull/toolruntime/mcpdoor"
)

// TestTelemetry: a call is a span under the client's trace, and counted
// by outcome.
func TestTelemetry(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	door := serveDoor(t, s, mcpdoor.Config{DevPrincipal: "dev", Tracer: tp.Tracer("t"), Meter: mp.Meter("t")})
	cs := connect(t, door.URL, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const tp0 = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}, Meta: mcp.Meta{"traceparent": tp0}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"text": "x"}}); err != nil {
		t.Fatal(err)
	}
	ended := spans.Ended()
	if len(ended) != 2 || ended[0].Name() != "tools/call echo" || ended[0].SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("spans %d: %v", len(ended), ended)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "mcp_door_calls_total" {
				for _, dp := range sum.DataPoints {
					o, _ := dp.Attributes.Value("outcome")
					got[o.AsString()] += dp.Value
				}
			}
		}
	}
	if got["ok"] != 1 || got["tool_error"] != 1 {
		t.Fatalf("calls by outcome %v", got)
	}
}
