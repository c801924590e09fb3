package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
)

// These tests run the worker as a real process: ports, locks and signals
// are the operating system's.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the worker binary the process tests built. Run as
// asked by TestMainStopsWithItsContext, it is that test's program instead.
func TestMain(m *testing.M) {
	if os.Getenv(mainCtxEnv) != "" {
		mainUntilStdinCloses()
	}
	if workertest.IsProgram() {
		Main(context.Background(), Config{Version: programVersion})
	}
	natstest.WaitingParallel() // its parallel tests wait on worker processes and NATS round trips
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// programVersion is the version cmd/worker has when built without
// -ldflags "-X main.version=…".
const programVersion = "0.1.0-dev"

// workerBinary returns the worker program the process tests run: this
// test binary, which is package worker's Main (all cmd/worker is) under
// the name "worker" (workertest.IsProgram). A `go build -race` of cmd/worker
// instead linked the whole worker a second time, 10 to 25 s of a loaded
// machine on the package's critical path.
func workerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the worker")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "worker-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// Every user may enter the directory: the hardening tests run the
		// binary as an unprivileged user too.
		if err := os.Chmod(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "worker")
		buildErr = workertest.CopySelf(binPath)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// proc is a worker process and what it wrote to stderr.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan struct{}
	err  error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// startWorker starts the worker with args and a clean environment but
// for env; it is killed when the test ends.
func startWorker(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(workerBinary(t), args...), done: make(chan struct{})}
	p.cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, env...)
	p.cmd.Stderr, p.cmd.Stdout = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitFor waits until the worker's output has want, or it exits.
func (p *proc) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(p.output(), want) {
		select {
		case <-p.done:
			if strings.Contains(p.output(), want) {
				return
			}
			t.Fatalf("worker exited (%v) without %q:\n%s", p.err, want, p.output())
		case <-deadline:
			t.Fatalf("no %q from the worker:\n%s", want, p.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// exit waits for the process to end and returns its exit code.
func (p *proc) exit(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("worker did not exit:\n%s", p.output())
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("worker: %v", p.err)
	return -1
}

// freeAddr is a loopback address no one listens on now.
func freeAddr(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// occupied listens on a free loopback port for the test's duration.
func occupied(t *testing.T) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

func TestMistypedFlagIsOneLineAndAHint(t *testing.T) {
	t.Parallel()
	p := startWorker(t, nil, "--concurency", "3")
	if code := p.exit(t); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	out := strings.TrimSpace(p.output())
	if lines := strings.Split(out, "\n"); len(lines) != 2 || !strings.Contains(lines[0], "-concurency") || !strings.Contains(lines[1], "--help") {
		t.Errorf("output, want the error and a pointer to --help:\n%s", out)
	}
}

// A program of one's own built on Main names itself, not "worker".
func TestFlagErrorNamesTheProgram(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(workerBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "my-tools")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "--concurency", "3").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2", err)
	}
	if !strings.HasPrefix(string(out), "my-tools: ") || !strings.Contains(string(out), "Run my-tools --help for the flags.") {
		t.Errorf("output, want the program's own name:\n%s", out)
	}
}

// A port of the embedded server in use is named at once with the flags
// that fix it; the client port, then the monitoring port.
func TestPortInUse(t *testing.T) {
	t.Parallel()
	taken, _ := occupied(t)
	_, freeMon := freeAddr(t)
	p := startWorker(t, nil, "--listen", taken, "--monitor-port", fmt.Sprint(freeMon), "--data-dir", t.TempDir())
	if code := p.exit(t); code == 0 {
		t.Fatal("the worker started on a port in use")
	}
	for _, want := range []string{"client port " + taken + " is in use", "--nats-url nats://" + taken, "--listen"} {
		if !strings.Contains(p.output(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.output())
		}
	}

	_, takenMon := occupied(t)
	free, _ := freeAddr(t)
	p = startWorker(t, nil, "--listen", free, "--monitor-port", fmt.Sprint(takenMon), "--data-dir", t.TempDir())
	if code := p.exit(t); code == 0 {
		t.Fatal("the worker started on a monitoring port in use")
	}
	for _, want := range []string{fmt.Sprintf("monitoring port 127.0.0.1:%d is in use", takenMon), "--monitor-port 0"} {
		if !strings.Contains(p.output(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.output())
		}
	}
}

// Two embedded workers on one data directory: the second is refused and
// says why; the first stops cleanly on a signal, saying what it waits for.
func TestDataDirLockAndCleanStop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr1, _ := freeAddr(t)
	a := startWorker(t, nil, "--listen", addr1, "--monitor-port", "0", "--data-dir", dir, "--diagnostics")
	a.waitFor(t, "worker running")
	if !strings.Contains(a.output(), "categories=todo,brain,schedules,background_jobs,workflows,diagnostics") {
		t.Errorf("start log does not list the categories:\n%s", a.output())
	}

	addr2, _ := freeAddr(t)
	b := startWorker(t, nil, "--listen", addr2, "--monitor-port", "0", "--data-dir", dir)
	if code := b.exit(t); code == 0 {
		t.Fatal("a second worker started on the same data directory")
	}
	for _, want := range []string{"data directory " + dir + " is in use by another worker (pid " + fmt.Sprint(a.cmd.Process.Pid) + ")", "--data-dir"} {
		if !strings.Contains(b.output(), want) {
			t.Errorf("second worker's output lacks %q:\n%s", want, b.output())
		}
	}

	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := a.exit(t); code != 0 {
		t.Errorf("exit %d after SIGINT:\n%s", code, a.output())
	}
	if !strings.Contains(a.output(), "stopping: waiting up to 30s for 0 running calls") || !strings.Contains(a.output(), "Ctrl-C again") {
		t.Errorf("the stop does not say what it waits for:\n%s", a.output())
	}
	if strings.Contains(a.output(), "disconnected from NATS") || strings.Contains(a.output(), "WARN") {
		t.Errorf("a clean stop warns:\n%s", a.output())
	}
	// The lock went with the process: the directory can be used again.
	c := startWorker(t, nil, "--listen", addr2, "--monitor-port", "0", "--data-dir", dir)
	c.waitFor(t, "worker running")
}

// The outside view: a worker started with --context connects to the
// context's server, says the protocol version in its micro info, and
// sends its spans, with the semantic conventions' names, to a collector
// given as OTEL_EXPORTER_OTLP_ENDPOINT.
func TestContextMicroInfoAndSpans(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	cfg := t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg, "nats", "context"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctxJSON, _ := json.Marshal(map[string]any{"url": s.ClientURL(), "description": "test"})
	if err := os.WriteFile(filepath.Join(cfg, "nats", "context", "local.json"), ctxJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	collector := newCollector(t)
	p := startWorker(t, []string{"XDG_CONFIG_HOME=" + cfg, "NATS_CONTEXT=local", "OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL,
		"OTEL_SERVICE_NAME=tools-test"}, "--diagnostics", "--storage", "memory", "--name", "w-ctx")
	p.waitFor(t, "worker running")

	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// "worker running" is logged as the service starts: ask until it answers.
	var msg *nats.Msg
	for deadline := time.Now().Add(20 * time.Second); ; {
		if msg, err = nc.Request("$SRV.INFO."+protocol.ServiceName, nil, 5*time.Second); err == nil {
			break
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.output(), `msg="spans are exported over OTLP/HTTP" endpoint=`+collector.URL+"/v1/traces") {
		t.Errorf("no start line says where spans go:\n%s", p.output())
	}
	if info.Metadata["worker_name"] != "w-ctx" {
		t.Errorf("micro info metadata %v, want worker_name the --name", info.Metadata)
	}
	if info.Metadata["protocol"] != "1.3" || info.Metadata["worker_version"] == "" || !strings.Contains(info.Metadata["categories"], "diagnostics") {
		t.Errorf("micro info metadata %v, want protocol 1.1, worker_version and the categories", info.Metadata)
	}

	// One step, its step.done, then a stop: the spans are flushed.
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := nc.SubscribeSync(protocol.Subject(protocol.PrefixOutput, "a1", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	step := `{"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c1","name":"ping","arguments":"{}"}]}`
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "a1", "t1"))
	m.Data = []byte(step)
	m.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	for {
		ev, err := sub.NextMsg(20 * time.Second)
		if err != nil {
			t.Fatalf("no step.done: %v\n%s", err, p.output())
		}
		if strings.Contains(string(ev.Data), `"step.done"`) {
			break
		}
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.exit(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	names, service := collector.spans()
	for _, want := range []string{"process turn.call.{agent_id}.{turn_id}", "execute_tool ping", "publish turn.call.output.{agent_id}.{turn_id}"} {
		if !names[want] {
			t.Errorf("collector has no %q span; got %v", want, names)
		}
	}
	if service != "tools-test" {
		t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", service)
	}
}

// collector is an OTLP/HTTP trace receiver: POST /v1/traces, protobuf.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	names   map[string]bool
	service string
}

func newCollector(t *testing.T) *collector {
	c := &collector{names: map[string]bool{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					c.service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					c.names[sp.Name] = true
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) spans() (map[string]bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for k := range c.names {
		out[k] = true
	}
	return out, c.service
}

// The first signal says how many calls the stop waits for.
func TestStopSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	addr, _ := freeAddr(t)
	httpAddr, _ := freeAddr(t)
	p := startWorker(t, nil, "--listen", addr, "--monitor-port", "0", "--data-dir", t.TempDir(), "--diagnostics",
		"--storage", "memory", "--http-addr", httpAddr, "--grace", "1m")
	p.waitFor(t, "worker running")
	startSleep(t, p, addr, httpAddr, 4000)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.exit(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.output())
	}
	if !strings.Contains(p.output(), "stopping: waiting up to 1m0s for 1 running call to finish") {
		t.Errorf("the stop does not count the running call:\n%s", p.output())
	}
}

func metrics(t *testing.T, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// startSleep publishes a step with one diagnostics sleep of ms to the
// worker p serves at addr, and returns once its metrics at httpAddr say
// the call runs.
func startSleep(t *testing.T, p *proc, addr, httpAddr string, ms int) {
	t.Helper()
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	step := fmt.Sprintf(`{"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c1","name":"sleep","arguments":"{\"ms\":%d}"}]}`, ms)
	if _, err := js.Publish(ctx, protocol.Subject(protocol.PrefixCall, "a1", "t1"), []byte(step)); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(metrics(t, httpAddr), "turn_worker_calls_in_flight 1") {
		select {
		case <-ctx.Done():
			t.Fatalf("the call never ran:\n%s", p.output())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
