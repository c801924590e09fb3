package engine_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/telemetry"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
)

// TestTraceAndMetrics: the gateway's traceparent parents the step's spans
// and is carried on every event; the metrics and health endpoints answer.
func TestTraceAndMetrics(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	tel, err := telemetry.Setup(context.Background(), telemetry.Config{Instance: "test", HTTPAddr: "127.0.0.1:0"}, workertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Close(context.Background()) })
	rec := tracetest.NewSpanRecorder()
	tel.Tracer = trace.NewTracerProvider(trace.WithSpanProcessor(rec)).Tracer("test")
	cfg := testConfig()
	cfg.Telemetry = tel
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))
	base := "http://" + tel.Addr().String()
	if body := get(t, base+"/readyz"); !strings.Contains(body, "ready") {
		t.Errorf("/readyz: %q", body)
	}

	g := newGateway(t, s)
	ev := g.watch("a1", "tr")
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	st := step("a1", "tr", 0, fc("c1", "ping", "```json\n{}\n```"), fc("c2", "nope", "{}"))
	m := natsMsg(t, protocol.Subject(protocol.PrefixCall, "a1", "tr"), st)
	m.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	m.Header.Set("Nats-Msg-Id", protocol.StepMsgID("a1", "tr", 0))
	if _, err := g.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	outputs, done := ev.untilDone()
	for _, e := range append([]event{done}, outputs["c1"], outputs["c2"]) {
		if tp := e.Header.Get("traceparent"); !strings.Contains(tp, traceID) {
			t.Errorf("event %s carries traceparent %q, want trace %s", e.Type, tp, traceID)
		}
	}
	// The process span ends once step.done is out, which the gateway may
	// read first: wait for it.
	const stepName = "process turn.call.{agent_id}.{turn_id}"
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if slices.ContainsFunc(rec.Ended(), func(sp trace.ReadOnlySpan) bool { return sp.Name() == stepName }) {
			break
		}
	}
	spans := map[string]trace.ReadOnlySpan{}
	for _, sp := range rec.Ended() {
		if sp.Name() == "process turn.tools" {
			continue // the catalog request of the service's readiness check
		}
		spans[sp.Name()] = sp
		if sp.SpanContext().TraceID().String() != traceID {
			t.Errorf("span %s in trace %s, want %s", sp.Name(), sp.SpanContext().TraceID(), traceID)
		}
	}
	stepSpan, ok := spans[stepName]
	if !ok {
		t.Fatalf("no step span; got %v", names(rec.Ended()))
	}
	if stepSpan.Parent().SpanID().String() != parentID {
		t.Errorf("step span's parent %s, want the gateway's %s", stepSpan.Parent().SpanID(), parentID)
	}
	for _, name := range []string{"execute_tool ping", "validate", "execute", "execute_tool nope", "publish turn.call.output.{agent_id}.{turn_id}"} {
		if _, ok := spans[name]; !ok {
			t.Errorf("no %q span; got %v", name, names(rec.Ended()))
		}
	}
	wantAttrs := map[string]map[string]string{
		"execute_tool ping": {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ping", "gen_ai.tool.call.id": "c1", "gen_ai.tool.type": "function"},
		"execute_tool nope": {"error.type": "unknown_tool"},
		"process turn.call.{agent_id}.{turn_id}": {"messaging.system": "nats", "messaging.operation.type": "process",
			"messaging.destination.name": "turn.call.a1.tr", "messaging.consumer.group.name": protocol.ConsumerCalls},
		"publish turn.call.output.{agent_id}.{turn_id}": {"messaging.system": "nats", "messaging.destination.name": "turn.call.output.a1.tr"},
	}
	for name, want := range wantAttrs {
		got := map[string]string{}
		for _, kv := range spans[name].Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("span %q: %s=%q, want %q", name, k, got[k], v)
			}
		}
	}
	if spans["execute"].Parent().SpanID() != spans["execute_tool ping"].SpanContext().SpanID() {
		t.Error("execute is not a child of its call's span")
	}

	// step.done is published before the consumer counts the step: poll.
	wants := []string{
		`turn_worker_calls_total{status="ok",tool="ping"}`,
		`turn_worker_calls_total{error_kind="unknown_tool",`,
		`turn_worker_repairs_total{`, `rung="strip_fences"`,
		`turn_worker_steps_total{`, `result="done"`,
		`turn_worker_call_duration_seconds_bucket{`,
		"turn_worker_calls_in_flight ",
		`go_goroutines `, `process_cpu_seconds_total `,
	}
	var metrics string
	missing := func() []string {
		metrics = get(t, base+"/metrics")
		var out []string
		for _, w := range wants {
			if !strings.Contains(metrics, w) {
				out = append(out, w)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		t.Errorf("/metrics lacks %v:\n%s", m, metrics)
	}
	for _, bad := range []string{"otel_scope_", `=""`} {
		if strings.Contains(metrics, bad) {
			t.Errorf("/metrics has %q:\n%s", bad, metrics)
		}
	}
}

func names(spans []trace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
