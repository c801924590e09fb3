// Command loadgen plays a gateway under load: it publishes N steps of
// no-op diagnostics calls (or, with --sleep, calls that take time) at a
// given concurrency, and reports steps per second and the latency from
// publish to step.done (p50, p90, p99).
//
// Against running workers (started with --diagnostics):
//
//	go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --steps 20000 --concurrency 256
//
// Self-contained, with an embedded server and in-process workers:
//
//	go run ./cmd/loadgen --workers 1 --steps 20000
//
// With --command, the calls are run_command of that command line, against
// a worker with --computer-root; at --concurrency 1 one agent sends its
// steps one after another, as a gateway's loop does
// (scripts/command-steps.sh compares sandboxed and unconfined commands):
//
//	go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --steps 100 --concurrency 1 --command true
//
// Other modes: --burst (fair share under one agent's burst), --cancel-storm
// and --cancel-pending (cancels that must not wait or be dropped),
// --catalog-slow (catalogs while an MCP server starts slowly); README,
// "Fair share under a burst", has them.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

type options struct {
	url         string
	steps       int
	concurrency int
	calls       int
	sleep       time.Duration
	command     string // run_command's command instead of ping (--command)
	agent       string // the steps' agent (--agent; "load" when empty)
	workers     int
	duration    time.Duration
	storage     string
	dataDir     string
	cpuProfile  string
	memProfile  string
	out         io.Writer // the report
	onRetry     func()    // told of each publish retried after no responders (tests)
	burstOpts   burstOptions
	cancelOpts  cancelOptions
	// catalogSlow, when set, is the MCP server whose slow start the
	// catalog mode asks for.
	catalogSlow string
	// stages, with --workers in burst mode, times the quiet steps'
	// stages in the workers' intake (the timeline of the report).
	stages *timeline
}

func main() {
	var o options
	flag.StringVar(&o.url, "nats-url", "nats://127.0.0.1:4222", "server the workers serve")
	flag.IntVar(&o.steps, "steps", 10000, "steps to publish (ignored with --duration)")
	flag.DurationVar(&o.duration, "duration", 0, "publish for this long instead of a fixed number of steps (soak)")
	flag.IntVar(&o.concurrency, "concurrency", 256, "steps in flight at once")
	flag.IntVar(&o.calls, "calls", 1, "ping calls per step")
	flag.DurationVar(&o.sleep, "sleep", 0, "call sleep for this long (whole milliseconds) instead of ping: tools that take time")
	flag.StringVar(&o.command, "command", "", "calls are run_command of this command line instead of ping, against a worker with --computer-root (e.g. true with --concurrency 1: sequential commands of one agent)")
	flag.StringVar(&o.agent, "agent", "load", "the agent whose steps are sent (two programs with different agents: two tenants, each its own home with --command)")
	flag.IntVar(&o.workers, "workers", 0, "start an embedded server and this many in-process workers instead of using --nats-url")
	flag.StringVar(&o.storage, "storage", "file", "with --workers: storage of the streams and buckets (file or memory)")
	flag.StringVar(&o.dataDir, "data-dir", "", "with --workers: JetStream store (default: a temporary directory)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (server and workers included with --workers)")
	flag.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of this process at the end (server and workers included with --workers)")
	flag.IntVar(&o.burstOpts.burst, "burst", 0, "burst mode: one agent publishes this many steps at once while --quiet agents ping (fair share)")
	flag.DurationVar(&o.burstOpts.burstSleep, "burst-sleep", 100*time.Millisecond, "burst mode: how long each burst step's sleep call takes")
	flag.IntVar(&o.burstOpts.quiet, "quiet", 8, "burst mode: quiet agents, each sending a ping step every --quiet-every")
	flag.DurationVar(&o.burstOpts.quietEvery, "quiet-every", 200*time.Millisecond, "burst mode: how often each quiet agent sends a step")
	flag.DurationVar(&o.burstOpts.idle, "idle", 2*time.Second, "burst mode: how long the quiet agents ping before the burst (the idle figures)")
	flag.IntVar(&o.burstOpts.shares, "shares", 0, "burst mode: after the burst, two tenants of --weights flood this many steps each together; their shares are reported")
	flag.IntVar(&o.cancelOpts.storm, "cancel-storm", 0, "cancel mode: a user's running call is cancelled behind this many cancels of other turns; reports the cancel's latency")
	flag.IntVar(&o.cancelOpts.pending, "cancel-pending", 0, "cancel mode: this many steps held for approval are cancelled at once with --cancel-reason-bytes reasons; checks every one is decided")
	flag.IntVar(&o.cancelOpts.reasonBytes, "cancel-reason-bytes", 900<<10, "cancel mode: the reason's size with --cancel-pending (at most the server's max payload less 1 KiB)")
	flag.StringVar(&o.catalogSlow, "catalog-slow", "", "catalog mode: one agent's catalog enables this MCP server (slow to start) while --quiet agents ask for catalogs back to back; reports their latency")
	weights := flag.String("weights", "1,3", "burst mode: the two tenants' fairness weights")
	flag.Parse()
	if _, err := fmt.Sscanf(*weights, "%g,%g", &o.burstOpts.weights[0], &o.burstOpts.weights[1]); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: --weights must be two numbers, as 1,3:", err)
		os.Exit(2)
	}
	o.out = os.Stdout
	if o.workers > 0 && o.burstOpts.burst > 0 {
		o.stages = newTimeline()
	}
	if os.Getenv("GOGC") == "" {
		// As the worker does (its --gc-percent): this program shares the
		// machine with what it measures, and its live heap is small.
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.steps < 1 || o.concurrency < 1 || o.calls < 0 || o.sleep < 0 {
		return errors.New("--steps and --concurrency must be at least 1, --calls and --sleep at least 0")
	}
	if o.command != "" && (o.sleep > 0 || o.workers > 0 || o.burstOpts.burst > 0 || o.cancelOpts.storm > 0 || o.cancelOpts.pending > 0 || o.catalogSlow != "") {
		return errors.New("--command runs against a running worker with --computer-root (--nats-url); it does not go with --sleep, --workers or another mode")
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.memProfile != "" {
		defer writeHeapProfile(o.memProfile)
	}
	url := o.url
	if o.workers > 0 {
		stopWorkers, u, err := startWorkers(ctx, o)
		if err != nil {
			return err
		}
		defer stopWorkers()
		url = u
	}
	nc, err := nats.Connect(url, nats.Name("loadgen"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.Stream(ctx, protocol.StreamCalls); err != nil {
		return fmt.Errorf("stream %s not found: is a worker running on %s? (%w)", protocol.StreamCalls, url, err)
	}
	switch {
	case o.cancelOpts.storm > 0:
		return cancelStorm(ctx, nc, js, o)
	case o.cancelOpts.pending > 0:
		return cancelPending(ctx, nc, js, o)
	case o.catalogSlow != "":
		return catalogSlow(ctx, url, o)
	}
	if o.burstOpts.burst > 0 {
		rep, err := runBurst(ctx, nc, o)
		if err != nil {
			return err
		}
		rep.print(o)
		return nil
	}
	return drive(ctx, nc, o)
}

// startWorkers starts an embedded server and in-process workers.
func startWorkers(ctx context.Context, o options) (func(), string, error) {
	dir := o.dataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "loadgen-js-"); err != nil {
			return nil, "", err
		}
	}
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: dir, NoMonitoring: true})
	if err != nil {
		return nil, "", err
	}
	storage := jetstream.FileStorage
	if o.storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range o.workers {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			cancel()
			return nil, "", err
		}
		cfg := engine.Config{Name: fmt.Sprintf("load-%d", i), Concurrency: max(64, o.concurrency), Topology: bus.Topology{Storage: storage}}
		if o.stages != nil {
			cfg.FairStage = o.stages.stage
		}
		w, err := engine.New(wctx, nc, cfg, turn.NewAssembler(diagnostics.Category(diagnostics.Config{})), nil, log)
		if err != nil {
			cancel()
			return nil, "", err
		}
		wg.Go(func() {
			_ = w.Run(wctx)
			nc.Close()
		})
	}
	return func() {
		cancel()
		wg.Wait()
		ns.Shutdown()
		if o.dataDir == "" {
			_ = os.RemoveAll(dir)
		}
	}, ns.ClientURL(), nil
}

var statusOK = []byte(`"status":"` + protocol.StatusOK + `"`)

func drive(ctx context.Context, nc *nats.Conn, o options) error {
	run := fmt.Sprintf("r%d", time.Now().UnixNano()%1e9)
	agent := o.agent
	if agent == "" {
		agent = "load"
	}
	var (
		mu       sync.Mutex
		started  = map[string]time.Time{}
		lat      []time.Duration
		errCnt   atomic.Int64
		errs     = map[string]int64{} // by error kind, guarded by mu
		firstErr string               // the first error's message, guarded by mu
	)
	slots := make(chan struct{}, o.concurrency)
	var doneCount atomic.Int64
	// Events are told apart by their message ids (step.done's is
	// <agent>.<turn>.<step>.done) and their turn by the subject, so that the load program
	// parses only what it must: it shares the machine with what it measures.
	outputs := protocol.PrefixOutput + "." + agent + "."
	sub, err := nc.Subscribe(outputs+">", func(m *nats.Msg) {
		turnID := strings.TrimPrefix(m.Subject, outputs)
		if !strings.HasPrefix(turnID, run+"-") {
			return
		}
		if m.Header.Get(jetstream.MsgIDHeader) != protocol.StepDoneMsgID(agent, turnID, 0) {
			// Not decoded (that was a quarter of this program's CPU): the
			// status is the only text of the event that can read
			// "status":"ok", since the outputs of ping and sleep do not.
			if !bytes.Contains(m.Data, statusOK) {
				errCnt.Add(1)
				// Failures are decoded: they are few, and what they say
				// is the hint when every call fails.
				var ev struct {
					Error *struct{ Kind, Message string } `json:"error"`
				}
				_ = json.Unmarshal(m.Data, &ev)
				kind, msg := "unknown", ""
				if ev.Error != nil {
					kind, msg = ev.Error.Kind, ev.Error.Message
				}
				mu.Lock()
				errs[kind]++
				if firstErr == "" {
					firstErr = msg
				}
				mu.Unlock()
			}
			return
		}
		mu.Lock()
		t0, ok := started[turnID]
		if ok {
			delete(started, turnID)
			lat = append(lat, time.Since(t0))
		}
		mu.Unlock()
		if ok {
			<-slots
			doneCount.Add(1)
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)

	name, args, binding := "ping", "{}", diagnostics.Binding
	if o.sleep > 0 {
		name, args = "sleep", fmt.Sprintf(`{"ms":%d}`, o.sleep.Milliseconds())
	}
	if o.command != "" {
		a, err := json.Marshal(map[string]string{"command": o.command})
		if err != nil {
			return err
		}
		name, args, binding = computer.RunCommandName, string(a), computer.Binding
	}
	// Steps are published with one reply subject per step under one
	// inbox, whose acknowledgements are read as the worker reads its own
	// (bus.PubAckError; jetstream's PublishMsgAsync decoded each and kept a
	// future for it: over a quarter of this program's CPU). "No responders"
	// (no stream listening for a moment: a leader change, a restart) is
	// retried with backoff, as the worker's publishes are; a step the
	// stream refuses ends the run, and its place is given back so that the
	// publishing loop, which stops at the next step, is not left waiting.
	acks := nc.NewInbox()
	var refused atomic.Pointer[error]
	var retries atomic.Int64
	attempts := map[string]int{} // guarded by mu
	var publish func(turnID string) error
	ackSub, err := nc.Subscribe(acks+".*", func(m *nats.Msg) {
		err := bus.PubAckError(m.Data)
		if err == nil {
			return
		}
		turnID := strings.TrimPrefix(m.Subject, acks+".")
		if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
			mu.Lock()
			attempts[turnID]++
			n := attempts[turnID]
			mu.Unlock()
			if n <= maxNoResponders {
				retries.Add(1)
				if o.onRetry != nil {
					o.onRetry()
				}
				time.AfterFunc(noRespondersDelay(n), func() {
					if err := publish(turnID); err != nil {
						refused.CompareAndSwap(nil, &err)
					}
				})
				return
			}
		}
		if len(m.Data) == 0 { // no stream took it
			err = fmt.Errorf("status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
		}
		refused.CompareAndSwap(nil, &err)
		<-slots
	})
	if err != nil {
		return err
	}
	defer ackSub.Unsubscribe()
	_ = ackSub.SetPendingLimits(-1, -1)

	calls := make([]any, o.calls)
	for i := range calls {
		calls[i] = map[string]any{"type": "function_call", "call_id": fmt.Sprintf("c%d", i), "name": name, "arguments": args}
	}
	// Every step is the same but for its turn id: built once, and the id
	// spliced in.
	template, err := json.Marshal(map[string]any{
		"agent_id": agent, "turn_id": "TURN-ID", "step": 0,
		"context": map[string]any{"kind": "text", "bindings": map[string]any{binding: true}},
		"output":  calls,
	})
	if err != nil {
		return err
	}
	head, tail, _ := bytes.Cut(template, []byte("TURN-ID"))
	publish = func(turnID string) error {
		m := stepMsg(agent, turnID, slices.Concat(head, []byte(turnID), tail))
		m.Reply = acks + "." + turnID
		return nc.PublishMsg(m)
	}
	var memBefore runtime.MemStats
	runtime.ReadMemStats(&memBefore)
	begin := time.Now()
	var published int
	var stopAt time.Time
	if o.duration > 0 {
		stopAt = begin.Add(o.duration)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for i := 0; ; i++ {
			if o.duration > 0 && time.Now().After(stopAt) || o.duration == 0 && i >= o.steps {
				return nil
			}
			select {
			case slots <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			if err := refused.Load(); err != nil {
				return fmt.Errorf("a step was not stored: %w", *err)
			}
			turnID := fmt.Sprintf("%s-%d", run, i)
			mu.Lock()
			started[turnID] = time.Now()
			mu.Unlock()
			if err := publish(turnID); err != nil {
				return err
			}
			published = i + 1
		}
	})
	if err := g.Wait(); err != nil {
		return err
	}
	for last, lastChange := int64(-1), time.Now(); doneCount.Load() < int64(published); {
		if err := refused.Load(); err != nil {
			return fmt.Errorf("a step was not stored: %w", *err)
		}
		if n := doneCount.Load(); n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > time.Minute {
			return fmt.Errorf("only %d of %d steps got step.done, none for a minute", n, published)
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	elapsed := time.Since(begin)
	var memAfter runtime.MemStats
	runtime.ReadMemStats(&memAfter)
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	what := "sleep=" + o.sleep.String()
	if o.command != "" {
		what = fmt.Sprintf("command=%q", o.command)
	}
	fmt.Fprintf(o.out, "steps=%d calls/step=%d %s concurrency=%d workers=%s elapsed=%s\n", published, o.calls, what, o.concurrency, workersLabel(o), elapsed.Round(time.Millisecond))
	fmt.Fprintf(o.out, "throughput=%.0f steps/s  latency p50=%s p90=%s p99=%s max=%s  call errors=%d\n",
		float64(published)/elapsed.Seconds(), pct(0.50).Round(10*time.Microsecond), pct(0.90).Round(10*time.Microsecond),
		pct(0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond), errCnt.Load())
	fmt.Fprintf(o.out, "loadgen heap: before=%dMiB after=%dMiB (in-process workers included with --workers)\n", memBefore.HeapAlloc>>20, memAfter.HeapAlloc>>20)
	if n := retries.Load(); n > 0 {
		fmt.Fprintf(o.out, "publishes retried after no responders: %d\n", n)
	}
	if total := int64(published) * int64(o.calls); total > 0 && errCnt.Load() >= total {
		return allFailed(errs, firstErr)
	}
	return nil
}

// maxNoResponders is how often one step is published again after "no
// responders"; with noRespondersDelay that is about 30 s.
const maxNoResponders = 20

func noRespondersDelay(attempt int) time.Duration {
	return min(50*time.Millisecond<<min(attempt-1, 5), 2*time.Second)
}

// allFailed is the error of a run whose every call failed, with what to
// do about it: a load that measures failures measures nothing.
func allFailed(kinds map[string]int64, first string) error {
	var parts []string
	for k, n := range kinds {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(parts)
	hint := "see the first error: " + first
	if len(kinds) == 1 && kinds["unknown_tool"] > 0 {
		hint = "the calls are to the diagnostics tools ping and sleep: start the worker with --diagnostics"
	}
	return fmt.Errorf("every call failed (%s): %s", strings.Join(parts, " "), hint)
}

func workersLabel(o options) string {
	if o.workers > 0 {
		return fmt.Sprintf("%d in-process", o.workers)
	}
	return "external"
}

func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen: writing the allocation profile:", err)
	}
}
