package telemetry

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// TestCachedSetsKeepLabelsApart: measurements with cached attribute sets
// are counted under their own labels, also past the cache's size.
func TestCachedSetsKeepLabelsApart(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	m, err := newMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.callEnded(&turn.Outcome{Name: "a", Ran: true})
	}
	m.callEnded(&turn.Outcome{Name: "b", Err: tool.Errorf(tool.ToolError, "no")})
	m.callEnded(&turn.Outcome{Name: "a", Err: tool.Errorf(tool.Timeout, "slow")})
	// Names the model made up share one label.
	for i := range 3 {
		m.callEnded(&turn.Outcome{Name: string(rune('x' + i)), Err: tool.Errorf(tool.UnknownTool, "no such tool")})
	}
	for i := range maxCachedSets + 10 {
		m.Step("S", string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
	}
	m.Step("S", "done", 1)
	m.Step("S", "done", 1)

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			sum, ok := mt.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				key := mt.Name
				for _, kv := range dp.Attributes.ToSlice() {
					key += " " + string(kv.Key) + "=" + kv.Value.Emit()
				}
				got[key] += dp.Value
			}
		}
	}
	for key, want := range map[string]int64{
		"turn_worker_calls status=ok tool=a":                                    3,
		"turn_worker_calls error_kind=tool_error status=error tool=b":           1,
		"turn_worker_calls error_kind=timeout status=error tool=a":              1,
		"turn_worker_calls error_kind=unknown_tool status=error tool=(unknown)": 3,
		"turn_worker_calls error_kind=unknown_tool status=error tool=x":         0,
		"turn_worker_steps result=done stream=S":                                2,
		"turn_worker_steps result=aa stream=S":                                  1,
		"turn_worker_steps result=jn stream=S":                                  1, // past the cache's size
	} {
		if got[key] != want {
			t.Errorf("%s: %d, want %d", key, got[key], want)
		}
	}
	if len(m.sets.sets) != maxCachedSets {
		t.Errorf("%d sets cached, want at most %d", len(m.sets.sets), maxCachedSets)
	}
}

func BenchmarkCallEnded(b *testing.B) {
	m, err := newMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())).Meter("test"))
	if err != nil {
		b.Fatal(err)
	}
	o := &turn.Outcome{Name: "ping", Ran: true}
	b.ReportAllocs()
	for b.Loop() {
		m.callEnded(o)
		m.Step("TURN_CALLS", "done", 1)
	}
}
