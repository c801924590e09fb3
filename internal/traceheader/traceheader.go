package traceheader

import (
	"context"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// headerCarrier adapts NATS headers to OpenTelemetry propagation. NATS
// header names are case-sensitive and kept as written, so "traceparent"
// stays lower-case on the wire, as W3C Trace Context spells it.
type headerCarrier nats.Header

func (c headerCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c headerCarrier) Set(key, value string) { c[key] = []string{value} }

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// propagator is W3C Trace Context and Baggage; it holds no state.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Inject writes ctx's trace context (W3C traceparent, tracestate and
// baggage) into h. Every message of the protocol carries it.
func Inject(ctx context.Context, h nats.Header) {
	propagator.Inject(ctx, headerCarrier(h))
}

// Extract returns ctx carrying the trace context found in h.
func Extract(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, headerCarrier(h))
}
