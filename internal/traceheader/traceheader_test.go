package traceheader_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/traceheader"
)

// A span's context crosses a message's headers under the W3C name,
// lower-case as written, and comes back out whole.
func TestInjectExtract(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		SpanID:     trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled,
	})
	h := nats.Header{}
	traceheader.Inject(trace.ContextWithSpanContext(context.Background(), sc), h)
	if got := h["traceparent"]; len(got) != 1 || got[0] != "00-0102030405060708090a0b0c0d0e0f10-0102030405060708-01" {
		t.Fatalf("headers %v", h)
	}
	back := trace.SpanContextFromContext(traceheader.Extract(context.Background(), h))
	if back.TraceID() != sc.TraceID() || back.SpanID() != sc.SpanID() || !back.IsRemote() {
		t.Errorf("extracted %+v", back)
	}
	if ctx := context.Background(); traceheader.Extract(ctx, nil) != ctx {
		t.Error("no headers changed the context")
	}
}
