package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
)

// Every event of a step, step.done included, is published inside a
// publish span of its own, a child of the step's process span, and its
// traceparent is that publish span, not the gateway's.
func TestEveryEventHasItsPublishSpan(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Instance: "test"}, workertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Close(context.Background()) })
	rec := tracetest.NewSpanRecorder()
	tel.Tracer = trace.NewTracerProvider(trace.WithSpanProcessor(rec)).Tracer("test")
	cfg := testConfig()
	cfg.Telemetry = tel
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))

	g := newGateway(t, s)
	ev := g.watch("a1", "tr")
	const traceID, gatewaySpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	m := natsMsg(t, protocol.Subject(protocol.PrefixCall, "a1", "tr"), step("a1", "tr", 0, fc("c1", "ping", "{}"), fc("c2", "nope", "{}")))
	m.Header.Set("traceparent", "00-"+traceID+"-"+gatewaySpan+"-01")
	if _, err := g.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	outputs, done := ev.untilDone()
	events := map[string]event{"step.done": done, "c1": outputs["c1"], "c2": outputs["c2"]}

	// The spans end as their publish is confirmed, the process span once
	// step.done is out: wait for all four.
	const processName, publishName = "process turn.call.{agent_id}.{turn_id}", "publish turn.call.output.{agent_id}.{turn_id}"
	var process trace.ReadOnlySpan
	var publishes map[oteltrace.SpanID]trace.ReadOnlySpan
	for deadline := time.Now().Add(10 * time.Second); ; {
		process, publishes = nil, map[oteltrace.SpanID]trace.ReadOnlySpan{}
		for _, sp := range rec.Ended() {
			switch sp.Name() {
			case processName:
				process = sp
			case publishName:
				publishes[sp.SpanContext().SpanID()] = sp
			}
		}
		if process != nil && len(publishes) >= len(events) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if process == nil {
		t.Fatalf("no process span; got %v", names(rec.Ended()))
	}
	if len(publishes) != len(events) {
		t.Errorf("%d publish spans on the outputs subject, want %d (two call.output, one step.done)", len(publishes), len(events))
	}
	for name, e := range events {
		tp := e.Header.Get("traceparent")
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Errorf("%s: traceparent %q, want trace %s", name, tp, traceID)
			continue
		}
		if parts[2] == gatewaySpan {
			t.Errorf("%s carries the gateway's span %s, not its own publish span", name, gatewaySpan)
			continue
		}
		id, err := oteltrace.SpanIDFromHex(parts[2])
		if err != nil {
			t.Fatal(err)
		}
		sp, ok := publishes[id]
		if !ok {
			t.Errorf("%s: traceparent span %s is no publish span", name, parts[2])
			continue
		}
		if sp.SpanKind() != oteltrace.SpanKindProducer || sp.Parent().SpanID() != process.SpanContext().SpanID() {
			t.Errorf("%s: publish span kind %s, parent %s; want producer under the process span %s", name, sp.SpanKind(), sp.Parent().SpanID(), process.SpanContext().SpanID())
		}
		if process.EndTime().Before(sp.EndTime()) {
			t.Errorf("%s: published after the process span ended", name)
		}
	}
}
