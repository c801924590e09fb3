// Command door measures what the MCP door (package mcpdoor) adds to a
// tool call: the latency of a tools/call through the door over the same
// one-call step sent directly with gateway.Client.Send (p50 and p99), and
// the calls per second one door serves.
//
// One process on loopback: an embedded NATS server (JetStream on files),
// a worker (worker.New) with one read-only no-op tool, a door
// (mcpdoor.New, a dev principal) on its own NATS connection behind an
// HTTP server on 127.0.0.1, and the official Go SDK's client
// (Streamable HTTP, the protocol version it negotiates). The direct path
// and the door path run the same step: a fresh turn, one function_call
// of the tool, until the call's call.output. They alternate call by call,
// so that both see the same machine.
//
// Usage (in this directory, its own module):
//
//	go run . [--calls 2000] [--concurrency 32] [--sessions 1] [--duration 10s]
//	         [--cpuprofile FILE] [--trace FILE]
//
// It prints p50 and p99 of each path and of the door's added latency
// (the difference of the two paths' quantiles), then the door's calls/s
// with --concurrency calls in flight for --duration, spread over
// --sessions MCP client sessions (one Go SDK session reads its answers
// on one goroutine, which bounds what one session can drive), then the
// calls/s of as many direct sends in flight.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/mcpdoor"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/worker"
)

func main() {
	calls := flag.Int("calls", 2000, "calls measured on each path, alternated")
	conc := flag.Int("concurrency", 32, "calls in flight for the throughput run")
	sessions := flag.Int("sessions", 1, "MCP client sessions (each its own HTTP client) the throughput run's calls are spread over")
	dur := flag.Duration("duration", 10*time.Second, "how long the throughput run lasts")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run (door, worker, NATS server, client) to this file")
	traceOut := flag.String("trace", "", "write an execution trace of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "door:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "door:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if *traceOut != "" {
		f, err := os.Create(*traceOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, "door:", err)
			os.Exit(1)
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "door:", err)
			os.Exit(1)
		}
		defer trace.Stop()
	}
	if err := run(*calls, *conc, *sessions, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "door:", err)
		pprof.StopCPUProfile()
		trace.Stop()
		os.Exit(1)
	}
}

type noop struct {
	Note string `json:"note,omitempty" jsonschema:"description=Ignored.,maxLength=100"`
}

// principal is the door's dev principal, and so the agent of its turns.
const principal = "bench"

func run(calls, conc, sessions int, dur time.Duration) error {
	dir, err := os.MkdirTemp("", "bench-door-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Each gateway.Send leaves its two ordered consumers (TURN_OUTPUTS,
	// TURN_DEAD) on the server until their 5 min inactive threshold, and
	// the server's default is 1,000 consumers per stream: past ~1,000
	// calls in 5 minutes a Send fails ("maximum consumers limit
	// reached"). The limit is lifted here so that the run measures the
	// door; the count left over is printed at the end.
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoSigs: true, NoLog: true,
		JetStreamLimits: server.JSLimitOpts{DefaultMaxConsumers: -1}})
	if err != nil {
		return err
	}
	go ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(30 * time.Second) {
		return errors.New("the NATS server did not start")
	}
	connect := func(name string) (*nats.Conn, error) { return nats.Connect(ns.ClientURL(), nats.Name(name)) }
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wnc, err := connect("bench-worker")
	if err != nil {
		return err
	}
	defer wnc.Close()
	nop := tool.Must(tool.Def[noop]{
		Spec: tool.Spec{Name: "noop", Description: "Does nothing.", ReadOnly: true},
		Execute: func(context.Context, noop) (tool.Result, error) {
			return tool.Result{Content: "ok"}, nil
		},
	})
	w, err := worker.New(wnc, worker.Config{Name: "bench-door", Logger: quiet},
		tool.Category{Name: "bench", Tools: func(context.Context, tool.Turn) ([]*tool.Tool, error) { return []*tool.Tool{nop}, nil }})
	if err != nil {
		return err
	}
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(ctx) }()
	defer func() { cancel(); <-wdone }()

	// The direct path: a gateway on its own connection.
	gnc, err := connect("bench-gateway")
	if err != nil {
		return err
	}
	defer gnc.Close()
	gw, err := gateway.New(gnc, gateway.Options{Logger: quiet})
	if err != nil {
		return err
	}
	// The door path: a door on its own connection, over loopback HTTP.
	dnc, err := connect("bench-door")
	if err != nil {
		return err
	}
	defer dnc.Close()
	// Rate -1: the bench measures what a call costs through the door,
	// not the pacing of one principal's requests to a rate.
	d, err := mcpdoor.New(mcpdoor.Config{NC: dnc, DevPrincipal: principal, Logger: quiet, MaxInFlight: 4 * conc, Rate: -1})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: d}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String() + mcpdoor.Path
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * conc}}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench-door", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpc}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	version := cs.InitializeResult().ProtocolVersion

	var seq atomic.Int64
	direct := func() error {
		n := seq.Add(1)
		item, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": "c1", "name": "noop", "arguments": `{"note":"x"}`})
		st := protocol.Step{AgentID: principal, TurnID: fmt.Sprintf("direct-%d", n), Context: protocol.Context{Kind: protocol.KindText},
			Output: []json.RawMessage{item}}
		r, err := gw.Send(ctx, st, gateway.WithActivity())
		if err != nil {
			return err
		}
		defer r.Close()
		for {
			ev, err := r.Next(ctx)
			if err != nil {
				return err
			}
			if o, ok := ev.(*protocol.CallOutput); ok {
				if o.Status != protocol.StatusOK {
					return fmt.Errorf("direct call: %s", o.Item)
				}
				return nil
			}
		}
	}
	viaDoor := func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{"note": "x"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New("door call: isError")
		}
		return nil
	}

	// Warm up both paths (streams, consumers, connections, the door's
	// catalog), then measure them alternately.
	for range 50 {
		if err := direct(); err != nil {
			return err
		}
		if err := viaDoor(); err != nil {
			return err
		}
	}
	dl, vl := make([]time.Duration, 0, calls), make([]time.Duration, 0, calls)
	for i := range calls {
		first, second, fl, sl := direct, viaDoor, &dl, &vl
		if i%2 == 1 {
			first, second, fl, sl = viaDoor, direct, &vl, &dl
		}
		t0 := time.Now()
		if err := first(); err != nil {
			return err
		}
		t1 := time.Now()
		if err := second(); err != nil {
			return err
		}
		*fl, *sl = append(*fl, t1.Sub(t0)), append(*sl, time.Since(t1))
	}
	d50, d99 := quantiles(dl)
	v50, v99 := quantiles(vl)
	fmt.Printf("machine: %s/%s, %d CPUs, %s; client protocol %s\n", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(), version)
	fmt.Printf("one call, %d on each path, sequential:\n", calls)
	fmt.Printf("  direct (gateway.Send):   p50 %8s  p99 %8s\n", ms(d50), ms(d99))
	fmt.Printf("  through the door (MCP):  p50 %8s  p99 %8s\n", ms(v50), ms(v99))
	fmt.Printf("  added by the door:       p50 %8s  p99 %8s\n", ms(v50-d50), ms(v99-d99))

	// Throughput: conc clients' calls in flight through the one door,
	// then the same number of direct sends, for what is behind the door.
	throughput := func(call func(context.Context) error) (int64, float64, error) {
		var (
			done    atomic.Int64
			wg      sync.WaitGroup
			errOnce sync.Once
			runErr  error
		)
		tctx, tcancel := context.WithTimeout(ctx, dur)
		defer tcancel()
		start := time.Now()
		for range conc {
			wg.Go(func() {
				for tctx.Err() == nil {
					err := call(tctx)
					if tctx.Err() != nil {
						return
					}
					if err != nil {
						errOnce.Do(func() { runErr = err; tcancel() })
						return
					}
					done.Add(1)
				}
			})
		}
		wg.Wait()
		return done.Load(), float64(done.Load()) / time.Since(start).Seconds(), runErr
	}
	clients := []*mcp.ClientSession{cs}
	for range max(0, sessions-1) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4 * conc}}
		more, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err != nil {
			return err
		}
		defer more.Close()
		clients = append(clients, more)
	}
	var turn atomic.Int64
	n, rate, err := throughput(func(ctx context.Context) error {
		cs := clients[int(turn.Add(1))%len(clients)]
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "noop", Arguments: map[string]any{"note": "x"}})
		if err == nil && res.IsError {
			err = errors.New("isError")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("throughput run: %w", err)
	}
	fmt.Printf("throughput, %d calls in flight for %s: %d calls, %.0f calls/s through one door (%d client sessions)\n", conc, dur, n, rate, len(clients))
	n, rate, err = throughput(func(context.Context) error { return direct() })
	if err != nil {
		return fmt.Errorf("direct throughput run: %w", err)
	}
	fmt.Printf("throughput, %d calls in flight for %s: %d calls, %.0f calls/s sent directly (gateway.Send)\n", conc, dur, n, rate)
	js, err := jetstream.New(gnc)
	if err != nil {
		return err
	}
	for _, name := range []string{protocol.StreamOutputs, protocol.StreamDead} {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("consumers left on %s: %d (the server's default limit is 1,000 per stream)\n", name, info.State.Consumers)
	}
	return nil
}

// quantiles returns the median and the 99th percentile (nearest rank).
func quantiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(q*float64(len(s))+0.5) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return rank(0.50), rank(0.99)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }
