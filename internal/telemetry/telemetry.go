// Package telemetry provides the worker's OpenTelemetry traces and
// metrics, and the HTTP port that serves them: Prometheus metrics on
// /metrics, liveness on /healthz and readiness on /readyz.
//
// Setup builds a tracer provider (exporting over OTLP/HTTP when an
// endpoint is configured, otherwise recording nothing) and a meter
// provider read by a Prometheus registry of its own. Metrics implements
// the hooks the turn and bus packages call (turn.Hooks, bus.StepMeter):
// they only count; nothing here decides anything.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Config configures telemetry. The zero value exports no traces and
// serves no HTTP port.
type Config struct {
	// ServiceName and Instance name the resource (turn-worker, the worker's name).
	ServiceName string
	Instance    string
	Version     string
	// OTLPEndpoint, when set, is where spans go over OTLP/HTTP (host:port,
	// or a URL; /v1/traces is added to a URL without a path).
	// OTLPFromEnv, without OTLPEndpoint, exports to where the
	// OTEL_EXPORTER_OTLP_* variables say. OTLPInsecure sends spans without
	// TLS.
	OTLPEndpoint string
	OTLPFromEnv  bool
	OTLPInsecure bool
	// HTTPAddr, when set, serves /metrics, /healthz and /readyz.
	HTTPAddr string
	// Profiling adds Go's /debug/pprof/ endpoints to HTTPAddr (not
	// cmdline: flags can carry credentials). They are not authenticated:
	// serve them on a private address.
	Profiling bool
}

// Telemetry is what Setup started.
type Telemetry struct {
	// Tracer is nil when spans go nowhere: no span is made then, and the
	// trace context of incoming steps still reaches outgoing events.
	Tracer  trace.Tracer
	Metrics *Metrics
	ready   atomic.Bool
	tp      *sdktrace.TracerProvider
	mp      *sdkmetric.MeterProvider
	srv     *http.Server
	addr    net.Addr
}

// Setup starts telemetry as configured.
func Setup(ctx context.Context, cfg Config, log *slog.Logger) (*Telemetry, error) {
	t := &Telemetry{}
	// The worker's own names come first: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, read after them, win, as the OTel SDK
	// specification has them.
	res, err := resource.New(ctx,
		resource.WithAttributes(nonEmpty(
			semconv.ServiceName(orDefault(cfg.ServiceName, "turn-worker")),
			semconv.ServiceInstanceID(cfg.Instance),
			semconv.ServiceVersion(cfg.Version),
		)...),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	if cfg.OTLPEndpoint != "" || cfg.OTLPFromEnv {
		// With no endpoint option the exporter reads the OTEL_EXPORTER_OTLP_*
		// variables itself, and appends /v1/traces to a signal-less
		// OTEL_EXPORTER_OTLP_ENDPOINT as the specification says; the
		// flag's URL is used as given but for that same path.
		var opts []otlptracehttp.Option
		if cfg.OTLPEndpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(endpointURL(cfg.OTLPEndpoint, cfg.OTLPInsecure)))
		} else if cfg.OTLPInsecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		t.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.Tracer = t.tp.Tracer("github.com/agentbull/toolruntime", trace.WithSchemaURL(semconv.SchemaURL))
	}
	// Go runtime and process series beside the worker's own; no
	// otel_scope_* labels: every instrument comes from one scope.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Name: "turn_worker_call_duration_seconds"},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{
				Boundaries: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
			}},
		)))
	if t.Metrics, err = newMetrics(t.mp.Meter("github.com/agentbull/toolruntime")); err != nil {
		return nil, err
	}
	if cfg.HTTPAddr != "" {
		ln, err := net.Listen("tcp", cfg.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("listening on %s for metrics and health: %w", cfg.HTTPAddr, err)
		}
		t.addr = ln.Addr()
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
			if !t.ready.Load() {
				http.Error(w, "not ready", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		})
		paths := "/metrics /healthz /readyz"
		if cfg.Profiling {
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
			mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
			paths += " /debug/pprof/"
		}
		t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics and health server stopped", "err", err)
			}
		}()
		log.Info("metrics and health endpoints", "addr", "http://"+ln.Addr().String(), "paths", paths)
	}
	return t, nil
}

// Addr is the address the HTTP port listens on, or nil.
func (t *Telemetry) Addr() net.Addr { return t.addr }

// SetReady sets what /readyz answers.
func (t *Telemetry) SetReady(ready bool) { t.ready.Store(ready) }

// Close flushes spans and stops the HTTP port.
func (t *Telemetry) Close(ctx context.Context) error {
	var errs []error
	if t.srv != nil {
		errs = append(errs, t.srv.Shutdown(ctx))
	}
	if t.tp != nil {
		errs = append(errs, t.tp.Shutdown(ctx))
	}
	if t.mp != nil {
		errs = append(errs, t.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

// endpointURL makes the flag's endpoint a URL: a scheme when it has
// none, and the traces path when it has no path (a collector's base
// address, http://collector:4318, is what operators write).
// CheckEndpoint refuses an OTLP endpoint the exporter could not send to:
// a URL that does not parse, a scheme other than http or https, no host,
// or a port that is not one. fromEnv is true for an
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT value, which must be a whole URL.
func CheckEndpoint(ep string, fromEnv bool) error {
	if fromEnv && !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		return fmt.Errorf("%q is not an http:// or https:// URL", ep)
	}
	if scheme, _, ok := strings.Cut(ep, "://"); ok && scheme != "http" && scheme != "https" {
		return fmt.Errorf("%q: the scheme must be http or https, not %q", ep, scheme)
	}
	u, err := url.Parse(endpointURL(ep, false))
	if err != nil {
		return fmt.Errorf("%q is not host:port or a URL: %v", ep, err)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("%q has no host", ep)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q has no valid port", ep)
		}
	}
	return nil
}

// Target says where spans go under cfg: the collector's URL, or "" when
// they are not exported. The variables are read as the exporter reads
// them.
func Target(cfg Config) string {
	switch {
	case cfg.OTLPEndpoint != "":
		return endpointURL(cfg.OTLPEndpoint, cfg.OTLPInsecure)
	case !cfg.OTLPFromEnv:
		return ""
	}
	if ep := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); ep != "" {
		return ep
	}
	ep := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	return strings.TrimSuffix(ep, "/") + "/v1/traces"
}

func endpointURL(ep string, insecure bool) string {
	if !strings.HasPrefix(ep, "http://") && !strings.HasPrefix(ep, "https://") {
		if insecure {
			ep = "http://" + ep
		} else {
			ep = "https://" + ep
		}
	}
	u, err := url.Parse(ep)
	if err != nil {
		return ep // the exporter reports it
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String()
}

// nonEmpty drops the attributes with an empty value: an empty label is
// noise on every series.
func nonEmpty(kvs ...attribute.KeyValue) []attribute.KeyValue {
	out := kvs[:0]
	for _, kv := range kvs {
		if kv.Value.Emit() != "" {
			out = append(out, kv)
		}
	}
	return out
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// attrs is a small helper for metric attribute sets.
func attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// Meter is a meter of the metrics served at /metrics, for a program
// beside the worker's own instruments (the MCP door's).
func (t *Telemetry) Meter(name string) metric.Meter { return t.mp.Meter(name) }
