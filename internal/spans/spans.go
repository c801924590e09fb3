package spans

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/protocol"
)

// Scope is the instrumentation scope of the worker's tracer.
const Scope = "github.com/agentbull/toolruntime"

// SchemaURL is the semantic conventions version the names follow.
const SchemaURL = semconv.SchemaURL

// Attributes of the worker's own, where no convention has one.
const (
	TurnIDKey  = attribute.Key("toolruntime.turn_id")
	StepKey    = attribute.Key("toolruntime.step")
	CallsKey   = attribute.Key("toolruntime.calls")
	RepairsKey = attribute.Key("toolruntime.repairs")
)

// Attributes of the MCP conventions, newer than the semconv package.
const (
	MCPMethodNameKey = attribute.Key("mcp.method.name")
	MCPServerKey     = attribute.Key("toolruntime.mcp.server")
)

var natsSystem = semconv.MessagingSystemKey.String("nats")

// ToolTypeFunction is gen_ai.tool.type of the worker's tools: the model
// names a function and its arguments, and the worker runs it.
const ToolTypeFunction = "function"

// ExecuteTool starts the span of one tool call, from resolving its tool to
// its outcome.
func ExecuteTool(ctx context.Context, tr trace.Tracer, tool, callID string) (context.Context, trace.Span) {
	return tr.Start(ctx, "execute_tool "+tool, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(tool),
		semconv.GenAIToolCallID(callID),
		semconv.GenAIToolType(ToolTypeFunction),
	))
}

// Fail marks span failed with the error kind of the protocol (error.type).
func Fail(span trace.Span, kind string) {
	span.SetStatus(codes.Error, kind)
	span.SetAttributes(semconv.ErrorTypeKey.String(kind))
}

// ProcessStep starts the consumer span of handling one step: a main-turn
// step from TURN_CALLS or a task step from TURN_TASKS.
func ProcessStep(ctx context.Context, tr trace.Tracer, st *protocol.Step) (context.Context, trace.Span) {
	prefix, group := protocol.PrefixCall, protocol.ConsumerCalls
	if st.Context.Kind == protocol.KindWorkflowTask {
		prefix, group = protocol.PrefixTask, protocol.ConsumerTasks
	}
	template := prefix + ".{agent_id}.{turn_id}"
	return tr.Start(ctx, "process "+template, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		natsSystem,
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(protocol.Subject(prefix, st.AgentID, st.TurnID)),
		semconv.MessagingDestinationTemplate(template),
		semconv.MessagingConsumerGroupName(group),
		semconv.GenAIAgentID(st.AgentID),
		TurnIDKey.String(st.TurnID),
		StepKey.Int64(st.Step),
		CallsKey.Int(len(st.Calls)),
	))
}

// ProcessRequest starts the server span of answering a request on a
// micro endpoint (turn.tools), in the given queue group.
func ProcessRequest(ctx context.Context, tr trace.Tracer, subject, group string) (context.Context, trace.Span) {
	return tr.Start(ctx, "process "+subject, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		natsSystem,
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingDestinationName(subject),
		semconv.MessagingConsumerGroupName(group),
	))
}

// Publish starts the producer span of a publish to subject, as a child of
// the span in ctx; template is the subject with its variable tokens
// named. With no recording span in ctx it makes nothing.
func Publish(ctx context.Context, subject, template string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	tr := parent.TracerProvider().Tracer(Scope, trace.WithSchemaURL(SchemaURL))
	return tr.Start(ctx, "publish "+template, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		natsSystem,
		semconv.MessagingOperationName("publish"),
		semconv.MessagingOperationTypeSend,
		semconv.MessagingDestinationName(subject),
		semconv.MessagingDestinationTemplate(template),
	))
}

// MCP starts the client span of one request to an MCP server (method
// "tools/call" with the tool's name, or "tools/list"), as a child of the
// span in ctx. With no recording span in ctx it makes nothing.
func MCP(ctx context.Context, server, method, tool string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	name := method
	attrs := []attribute.KeyValue{MCPMethodNameKey.String(method), MCPServerKey.String(server)}
	if tool != "" {
		name += " " + tool
		attrs = append(attrs, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(tool))
	}
	tr := parent.TracerProvider().Tracer(Scope, trace.WithSchemaURL(SchemaURL))
	return tr.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// End ends span, failed with err's text when err is not nil.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
