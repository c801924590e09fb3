package telemetry

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// TestCachedSetsKeepLabelsApart: measurements with cached attribute sets
// are counted under their own labels, up to maxSeries series a counter;
// past that, under the overflow series, as the SDK's cardinality limit
// would.
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
	m.Step("S", "done", 1)
	for i := range maxSeries + 10 { // done holds one place
		m.Step("S", fmt.Sprint("r", i), 1)
	}
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
		"turn_worker_steps result=r0 stream=S":                                  1,
		"turn_worker_steps result=r1022 stream=S":                               1,
		"turn_worker_steps result=r1023 stream=S":                               0, // past maxSeries
		"turn_worker_steps otel.metric.overflow=true":                           11,
	} {
		if got[key] != want {
			t.Errorf("%s: %d, want %d", key, got[key], want)
		}
	}
	if n := len(m.stepCounts.series); n != maxSeries {
		t.Errorf("%d step series, want %d", n, maxSeries)
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
