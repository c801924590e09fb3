package mcp_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

// MCP requests made under a recorded span get client spans of their own:
// tools/list when the catalog is built, tools/call <tool> per call, a
// failed call marked failed.
func TestMCPSpans(t *testing.T) {
	t.Parallel()
	cfg, _ := stdioConfig(t)
	m := newManager(t, map[string]mcp.ServerConfig{"go": cfg})
	rec := tracetest.NewSpanRecorder()
	tr := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	ctx, root := tr.Start(context.Background(), "root")
	set := assemble(t, m, textContext("go")) // lists without a span: none recorded
	if o := dispatch(ctx, set, "go", "echo", `{"text":"hi"}`); o.Err != nil {
		t.Fatalf("echo: %v", o.Err)
	}
	root.End()
	var call sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "tools/call echo" {
			call = sp
		}
	}
	if call == nil {
		t.Fatalf("no tools/call echo span; got %v", spanNames(rec.Ended()))
	}
	if call.Parent().TraceID() != root.SpanContext().TraceID() {
		t.Error("the MCP span is not in the caller's trace")
	}
	attrs := map[string]string{}
	for _, kv := range call.Attributes() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "echo" || attrs["toolruntime.mcp.server"] != "go" {
		t.Errorf("attributes %v", attrs)
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}
