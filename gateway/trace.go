package gateway

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
)

// The gateway shares the contract (package protocol) with the workers,
// not their code: what follows is its own, so that it links nothing of
// the worker.

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

// injectTrace writes ctx's trace context (W3C traceparent, tracestate and
// baggage) into h: every message the gateway sends carries it, so that
// the workers' spans join the gateway's trace.
func injectTrace(ctx context.Context, h nats.Header) {
	propagator.Inject(ctx, headerCarrier(h))
}

// pause waits d, or until ctx ends (then it returns ctx's cause): the
// pause between two tries of a request.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
