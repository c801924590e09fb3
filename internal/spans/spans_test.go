package spans

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Publish and MCP make children of the span in ctx with its provider, and
// nothing at all without a recording span.
func TestChildSpansFollowTheContext(t *testing.T) {
	ctx, span := Publish(context.Background(), "turn.call.output.a.t", "turn.call.output.{agent_id}.{turn_id}")
	if span.IsRecording() || trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Fatal("a span without a traced caller")
	}
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	ctx, root := tr.Start(context.Background(), "root")
	_, pub := Publish(ctx, "turn.call.output.a.t", "turn.call.output.{agent_id}.{turn_id}")
	pub.End()
	_, call := MCP(ctx, "files", "tools/call", "read")
	End(call, context.DeadlineExceeded)
	root.End()
	got := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		got[s.Name()] = s
	}
	p, c := got["publish turn.call.output.{agent_id}.{turn_id}"], got["tools/call read"]
	if p == nil || c == nil {
		t.Fatalf("spans %v", got)
	}
	if p.SpanKind() != trace.SpanKindProducer || c.SpanKind() != trace.SpanKindClient {
		t.Errorf("kinds %v, %v", p.SpanKind(), c.SpanKind())
	}
	if p.Parent().SpanID() != root.SpanContext().SpanID() || c.Status().Code.String() != "Error" {
		t.Errorf("publish parent %v, call status %v", p.Parent().SpanID(), c.Status())
	}
}
