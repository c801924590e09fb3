package bus

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/spans"
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

// InjectTrace writes ctx's trace context into h.
func InjectTrace(ctx context.Context, h nats.Header) {
	propagator.Inject(ctx, headerCarrier(h))
}

// ExtractTrace returns ctx carrying the trace context found in h.
func ExtractTrace(ctx context.Context, h nats.Header) context.Context {
	if h == nil {
		return ctx
	}
	return propagator.Extract(ctx, headerCarrier(h))
}

// publishSpan starts the producer span of a publish to subject, under the
// span in ctx (none without one). The span's name has the subject with
// its agent and turn named, not their values: span names must stay few.
func publishSpan(ctx context.Context, subject string) (context.Context, trace.Span) {
	if span := trace.SpanFromContext(ctx); !span.IsRecording() {
		return ctx, span // no tracing: not even the template is made
	}
	return spans.Publish(ctx, subject, subjectTemplate(subject))
}

// subjectTemplate names the variable tokens of the subjects the worker
// publishes to: <prefix>.<agent_id>.<turn_id> and workflow.event.<id>.
func subjectTemplate(subject string) string {
	if id, ok := strings.CutPrefix(subject, protocol.PrefixWFEvt+"."); ok && id != "" {
		return protocol.PrefixWFEvt + ".{workflow_id}"
	}
	t := strings.Split(subject, ".")
	if len(t) < 3 {
		return subject
	}
	return strings.Join(t[:len(t)-2], ".") + ".{agent_id}.{turn_id}"
}
