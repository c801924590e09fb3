package mcpdoor

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// instruments are the door's metrics: calls by outcome and their
// duration, and requests refused before the SDK by reason.
type instruments struct {
	calls    metric.Int64Counter
	duration metric.Float64Histogram
	refused  metric.Int64Counter
}

func newInstruments(m metric.Meter) *instruments {
	if m == nil {
		m = noop.NewMeterProvider().Meter("")
	}
	in := &instruments{}
	in.calls, _ = m.Int64Counter("mcp_door_calls_total", metric.WithDescription("tools/call requests by outcome: ok, tool_error, input_required, cancelled, failed"))
	in.duration, _ = m.Float64Histogram("mcp_door_call_duration_seconds", metric.WithUnit("s"), metric.WithDescription("tools/call requests from the door's start of the call to its answer"))
	in.refused, _ = m.Int64Counter("mcp_door_refused_total", metric.WithDescription("requests refused before MCP by reason: host, origin, in_flight, body_size"))
	return in
}

func (in *instruments) refuse(ctx context.Context, reason string) {
	in.refused.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}

// startCall starts the span of a tools/call (MCP and GenAI semantic
// conventions), under the client's trace when _meta carried one; its
// context parents the step's NATS publish. end records the outcome.
func (d *Door) startCall(ctx context.Context, tool string) (context.Context, func(outcome string, err error)) {
	start := time.Now()
	var span trace.Span
	if d.cfg.Tracer != nil {
		ctx, span = d.cfg.Tracer.Start(ctx, "tools/call "+tool, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("mcp.method.name", "tools/call"),
			attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.operation.name", "execute_tool"),
		))
	}
	return ctx, func(outcome string, err error) {
		attrs := metric.WithAttributes(attribute.String("outcome", outcome))
		d.m.calls.Add(context.Background(), 1, attrs)
		d.m.duration.Record(context.Background(), time.Since(start).Seconds(), attrs)
		if span != nil {
			span.SetAttributes(attribute.String("mcp.door.outcome", outcome))
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			} else if outcome == "tool_error" {
				span.SetStatus(codes.Error, "tool error")
			}
			span.End()
		}
	}
}
