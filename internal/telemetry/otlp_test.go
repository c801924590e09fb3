package telemetry

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentbull/toolruntime/internal/spans"
)

// receiver is an OTLP/HTTP trace receiver as a collector has it: it
// answers POST /v1/traces with protobuf, and 404 elsewhere.
type receiver struct {
	*httptest.Server
	mu    sync.Mutex
	got   []*coltracepb.ExportTraceServiceRequest
	paths []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.paths = append(r.paths, req.URL.Path)
		r.mu.Unlock()
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		body, err := io.ReadAll(req.Body)
		var msg coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, &msg)
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

// spans are the names of the spans received, and the resource
// attributes of their batches.
func (r *receiver) spans() (names []string, resource map[string]string, paths []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	resource = map[string]string{}
	for _, req := range r.got {
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.Resource.GetAttributes() {
				resource[kv.Key] = kv.Value.GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					names = append(names, sp.Name)
				}
			}
		}
	}
	return names, resource, r.paths
}

// TestOTLPExport: spans reach a collector given by its base address, the
// way operators write it, from the flag or from the OTel variables; the
// resource takes OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func TestOTLPExport(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(base string) Config
		env  func(base string) map[string]string
	}{
		{name: "env base endpoint", cfg: func(string) Config { return Config{OTLPFromEnv: true} },
			env: func(base string) map[string]string { return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": base} }},
		{name: "env traces endpoint", cfg: func(string) Config { return Config{OTLPFromEnv: true} },
			env: func(base string) map[string]string {
				return map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": base + "/v1/traces"}
			}},
		{name: "flag base URL", cfg: func(base string) Config { return Config{OTLPEndpoint: base} }},
		{name: "flag base URL with slash", cfg: func(base string) Config { return Config{OTLPEndpoint: base + "/"} }},
		{name: "flag host:port", cfg: func(base string) Config {
			return Config{OTLPEndpoint: strings.TrimPrefix(base, "http://"), OTLPInsecure: true}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReceiver(t)
			t.Setenv("OTEL_SERVICE_NAME", "tools-eu")
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test,service.namespace=agents")
			if c.env != nil {
				for k, v := range c.env(r.URL) {
					t.Setenv(k, v)
				}
			}
			cfg := c.cfg(r.URL)
			cfg.Instance, cfg.Version = "w1", "1.2.3"
			tel, err := Setup(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if tel.Tracer == nil {
				t.Fatal("no tracer: export is off")
			}
			_, span := spans.ExecuteTool(context.Background(), tel.Tracer, "ping", "c1")
			span.End()
			if err := tel.Close(context.Background()); err != nil {
				t.Fatalf("close (flushes the spans): %v", err)
			}
			names, res, paths := r.spans()
			if len(names) != 1 || names[0] != "execute_tool ping" {
				t.Errorf("received spans %v (posted to %v), want [execute_tool ping]", names, paths)
			}
			for k, want := range map[string]string{
				"service.name": "tools-eu", "service.instance.id": "w1", "service.version": "1.2.3",
				"deployment.environment.name": "test", "service.namespace": "agents",
			} {
				if res[k] != want {
					t.Errorf("resource %s=%q, want %q", k, res[k], want)
				}
			}
		})
	}
}

// Without an endpoint, from the flag or the environment, nothing is
// exported and no tracer is made.
func TestNoExportWithoutEndpoint(t *testing.T) {
	tel, err := Setup(context.Background(), Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Close(context.Background())
	if tel.Tracer != nil {
		t.Fatal("a tracer without an endpoint")
	}
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"collector:4318":                    "https://collector:4318/v1/traces",
		"http://collector:4318":             "http://collector:4318/v1/traces",
		"https://collector:4318/":           "https://collector:4318/v1/traces",
		"http://collector:4318/custom/path": "http://collector:4318/custom/path",
		"https://collector:4318/v1/traces":  "https://collector:4318/v1/traces",
	} {
		if got := endpointURL(in, false); got != want {
			t.Errorf("endpointURL(%q) = %q, want %q", in, got, want)
		}
	}
}
