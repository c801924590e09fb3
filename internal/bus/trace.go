package bus

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/protocol"
)

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
