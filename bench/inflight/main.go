// Command inflight measures the worker's heap per long call in flight
// (issue 26): N calls of the diagnostics tool sleep (8,192 of 5 s by
// default) are put in flight on one worker, and the worker's live heap
// (runtime/metrics /gc/heap/live:bytes right after a forced collection)
// is read before the load and once during it, just before the first
// calls end (at --sleep less 600 ms), when every call started is in
// flight.
//
// Three processes, so that only the worker is counted: this program
// re-executes itself as the NATS server (bus.StartEmbedded, JetStream on
// files) and as the worker (worker.New with the diagnostics tools,
// --concurrency large enough for every call at once), and runs the load
// program (cmd/loadgen --sleep, built by the caller) as the third. The
// worker answers a line "m" on its stdin with its live heap and
// goroutines after runtime.GC().
//
// Usage (from the repository's root):
//
//	go build -o /tmp/loadgen ./cmd/loadgen && go run ./bench/inflight --loadgen /tmp/loadgen
//
// It prints the baseline, the peak and (peak - baseline) / calls, and
// the load program's elapsed time: about the sleep when every call was in
// flight at once. With --trace 250ms it also prints the work consumer's
// state as the server sees it (steps delivered, still stored, pull
// requests waiting) while the load runs: a run with fewer calls in flight
// than asked tells a worker that stopped pulling (steps stored, no request
// waiting, nothing delivered) from one that was slow (delivered rising).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		exit(serve())
	}
	if len(os.Args) > 2 && os.Args[1] == "worker" {
		exit(work(os.Args[2], os.Args[3:]))
	}
	calls := flag.Int("calls", 8192, "calls in flight")
	sleep := flag.Duration("sleep", 5*time.Second, "how long each call takes")
	loadgen := flag.String("loadgen", "", "the load program's binary (go build ./cmd/loadgen)")
	memprofile := flag.String("memprofile", "", "write the worker's heap profile here at the reading")
	goroutines := flag.String("goroutines", "", "write the worker's goroutines (pprof debug=1: how many wait where) here at the reading")
	trace := flag.Duration("trace", 0, "print the work consumer's state (delivered, ack pending, pending, waiting pulls) this often while the load runs")
	flag.Parse()
	if *loadgen == "" {
		exit(errors.New("--loadgen is required: go build -o /tmp/loadgen ./cmd/loadgen"))
	}
	exit(drive(*calls, *sleep, *loadgen, *memprofile, *goroutines, *trace))
}

func exit(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "inflight:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serve runs the server until its stdin closes, printing its URL.
func serve() error {
	dir, err := os.MkdirTemp("", "inflight-js-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// The server's warnings (a slow consumer, a pull request refused) go
	// to stderr: they explain a run that comes short.
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, StoreDir: dir, NoMonitoring: true, Logger: log})
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	fmt.Println(ns.ClientURL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// work runs one worker on url and answers the driver's measurements.
func work(url string, args []string) error {
	conc, _ := strconv.Atoi(args[0])
	if len(args) > 1 {
		// A finer sampling for --memprofile: the default (one sample per
		// 512 KiB) names too few of the calls' allocations to tell them
		// apart.
		runtime.MemProfileRate, _ = strconv.Atoi(args[1])
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	nc, err := nats.Connect(url, nats.Name("inflight-worker"))
	if err != nil {
		return err
	}
	defer nc.Close()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := engine.Config{Name: "inflight", Concurrency: conc}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(diagnostics.Category(diagnostics.Config{})), nil, log)
	if err != nil {
		return err
	}
	// The streams exist (worker.New set them up); the worker serves
	// once told to ("run").
	done := make(chan error, 1)
	running := false
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "run":
			if !running {
				running = true
				go func() { done <- w.Run(ctx) }()
			}
			fmt.Println("running")
		case "m":
			live, stacks, sleeping := measure()
			fmt.Println(live, stacks, sleeping)
		case "n":
			fmt.Println(runtime.NumGoroutine())
		case "profile", "goroutines":
			runtime.GC()
			f, err := os.Create(arg)
			if err == nil {
				if cmd == "profile" {
					err = pprof.Lookup("heap").WriteTo(f, 0)
				} else {
					err = pprof.Lookup("goroutine").WriteTo(f, 1)
				}
				err = errors.Join(err, f.Close())
			}
			fmt.Println("profiled", err)
		}
	}
	cancel()
	if !running {
		return nil
	}
	return <-done
}

// measure collects and reads the live heap, the goroutine stacks and how
// many calls are in flight: goroutines in the sleep tool's wait.
func measure() (live, stacks uint64, sleeping int) {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	// debug=1: "N @ pcs" then the frames of those N goroutines.
	n := 0
	for _, l := range strings.Split(b.String(), "\n") {
		if c, _, ok := strings.Cut(l, " @ "); ok {
			n, _ = strconv.Atoi(c)
			continue
		}
		if strings.Contains(l, "/internal/category/diagnostics.sleep+") {
			sleeping += n
			n = 0
		}
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64(), sleeping
}

type proc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func start(name string, args ...string) (*proc, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd, in: in, out: bufio.NewScanner(out)}, nil
}

func (p *proc) line() (string, error) {
	if !p.out.Scan() {
		return "", fmt.Errorf("%s ended: %v", p.cmd.Path, p.out.Err())
	}
	return p.out.Text(), nil
}

func (p *proc) stop() {
	p.in.Close()
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// reading is one of the worker's answers.
type reading struct {
	live, stacks uint64
	inFlight     int
}

// sample asks the worker for a reading.
func sample(w *proc) (reading, error) {
	var r reading
	if _, err := fmt.Fprintln(w.in, "m"); err != nil {
		return r, err
	}
	l, err := w.line()
	if err != nil {
		return r, err
	}
	if _, err := fmt.Sscan(l, &r.live, &r.stacks, &r.inFlight); err != nil {
		return r, fmt.Errorf("worker said %q: %w", l, err)
	}
	return r, nil
}

// count asks the worker how many goroutines it has.
func count(w *proc) (int, error) {
	if _, err := fmt.Fprintln(w.in, "n"); err != nil {
		return 0, err
	}
	l, err := w.line()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(l)
	if err != nil {
		return 0, fmt.Errorf("worker said %q: %w", l, err)
	}
	return n, nil
}

func drive(calls int, sleep time.Duration, loadgen, memprofile, goroutines string, trace time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	srv, err := start(self, "serve")
	if err != nil {
		return err
	}
	defer srv.stop()
	url, err := srv.line()
	if err != nil {
		return err
	}
	// A key (agent) gets 7/8 of the worker's concurrency: every call
	// in flight needs calls / (7/8) and some room.
	wargs := []string{"worker", url, strconv.Itoa(calls*8/7 + 64)}
	if memprofile != "" {
		wargs = append(wargs, "512")
	}
	w, err := start(self, wargs...)
	if err != nil {
		return err
	}
	defer w.stop()
	if l, err := w.line(); err != nil || l != "ready" {
		return fmt.Errorf("worker: %q %v", l, err)
	}
	// The worker's figure before it serves: what it allocates once
	// when it starts serving (its consumers, pools) is counted in the
	// calls' figure, which errs high by that much over 8,192 calls.
	base, err := sample(w)
	if err != nil {
		return err
	}
	idle, err := count(w)
	if err != nil {
		return err
	}
	// The load publishes every step, and the server stores them, before
	// the worker serves: serving while the load program and the server
	// store the steps, on two cores it starts calls too slowly for all of
	// them to be in flight at once (the first ends before the last
	// begins). (A worker stopped with SIGSTOP meanwhile would miss its
	// pulls' heartbeats.)
	nc, err := nats.Connect(url, nats.Name("inflight-driver"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	var loadOut strings.Builder
	load := exec.Command(loadgen, "--nats-url", url, "--steps", strconv.Itoa(calls), "--concurrency", strconv.Itoa(calls), "--sleep", sleep.String())
	load.Stdout, load.Stderr = &loadOut, os.Stderr
	if err := load.Start(); err != nil {
		return err
	}
	stored := time.Now().Add(60 * time.Second)
	for {
		st, err := js.Stream(context.Background(), protocol.StreamCalls)
		if err != nil {
			return err
		}
		if st.CachedInfo().State.Msgs >= uint64(calls) || time.Now().After(stored) {
			fmt.Printf("stored %d steps before the worker serves\n", st.CachedInfo().State.Msgs)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintln(w.in, "run")
	if l, err := w.line(); err != nil || l != "running" {
		return fmt.Errorf("worker: %q %v", l, err)
	}
	t0 := time.Now()
	if trace > 0 {
		stop := make(chan struct{})
		defer close(stop)
		go watch(js, t0, trace, stop)
	}
	loadDone := make(chan error, 1)
	go func() { loadDone <- load.Wait() }()
	// A reading collects the heap and walks every goroutine's stack,
	// which on two cores takes the CPU the worker's intake needs: frequent
	// readings would hold the calls in flight to a fraction of the load.
	// So it is taken from half the sleep on (as late as before, within
	// 20 bytes a call: read at 0.6 s it was some 20 B a call less), once
	// every call may be in flight (the worker's goroutines, cheap to
	// count, are as many as the calls more than before it served), and
	// again 250 ms later until it finds all of them; at the latest just
	// before the first calls end (they started at the earliest when the
	// worker did). A single reading left to that last moment came after
	// the first calls had ended when the loaded machine took seconds over
	// it: it printed 0 calls in flight.
	margin := min(600*time.Millisecond, sleep/8)
	last := sleep - margin
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var peak reading
	var peakAt time.Duration
	next := sleep / 2
	read := false
	var loadErr error
wait:
	for {
		select {
		case loadErr = <-loadDone:
			break wait
		case <-tick.C:
			now := time.Since(t0)
			if read || now < next {
				continue
			}
			late := now >= last
			if !late {
				n, err := count(w)
				if err != nil {
					return err
				}
				if n < idle+calls {
					continue
				}
			}
			r, err := sample(w)
			if err != nil {
				return err
			}
			if r.inFlight >= peak.inFlight {
				peak, peakAt = r, time.Since(t0)
			}
			if r.inFlight < calls && !late {
				next = time.Since(t0) + 250*time.Millisecond
				continue
			}
			read = true
			for cmd, path := range map[string]string{"profile": memprofile, "goroutines": goroutines} {
				if path != "" {
					fmt.Fprintln(w.in, cmd+" "+path)
					if _, err := w.line(); err != nil {
						return err
					}
				}
			}
		}
	}
	if loadErr != nil {
		return fmt.Errorf("load: %w\n%s", loadErr, loadOut.String())
	}
	fmt.Print(loadOut.String())
	fmt.Printf("calls=%d sleep=%s baseline: heap %d B, stacks %d B; most in flight: %d calls at %s, heap %d B, stacks %d B\n",
		calls, sleep, base.live, base.stacks, peak.inFlight, peakAt.Round(time.Millisecond), peak.live, peak.stacks)
	if peak.inFlight == 0 {
		return errors.New("no call was seen in flight")
	}
	n := float64(peak.inFlight)
	fmt.Printf("per call in flight: heap %.0f B (%.1f KiB), goroutine stacks %.0f B (%.1f KiB)\n",
		float64(peak.live-base.live)/n, float64(peak.live-base.live)/n/1024, float64(peak.stacks-base.stacks)/n, float64(peak.stacks-base.stacks)/n/1024)
	if peak.inFlight < calls {
		fmt.Printf("NOTE: at most %d of the %d calls were in flight at once (the machine or the server was too slow to start them all within %s)\n", peak.inFlight, calls, sleep)
	}
	return nil
}

// watch prints the work consumer's state every period until stop: how
// many steps the server delivered, how many are out unacknowledged, how
// many are left to deliver and how many pull requests wait on it.
func watch(js jetstream.JetStream, t0 time.Time, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		c, err := js.Consumer(ctx, protocol.StreamCalls, protocol.ConsumerCalls)
		cancel()
		if err != nil {
			fmt.Printf("trace %s: %v\n", time.Since(t0).Round(time.Millisecond), err)
			continue
		}
		i := c.CachedInfo()
		fmt.Printf("trace %s: delivered %d ack_pending %d pending %d waiting %d (max_waiting %d max_ack_pending %d)\n",
			time.Since(t0).Round(time.Millisecond), i.Delivered.Consumer, i.NumAckPending, i.NumPending, i.NumWaiting, i.Config.MaxWaiting, i.Config.MaxAckPending)
	}
}
