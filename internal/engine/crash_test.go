package engine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
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

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/worker"
)

// builtWorker is the worker program, made once and shared by every test
// that runs it; TestMain removes its directory.
var builtWorker struct {
	once     sync.Once
	dir, bin string
	err      error
}

// TestMain runs the worker program instead of the tests when this
// process is that program (workertest.IsProgram).
//
// It starts the worker's build at once when the whole package runs
// (no -run, not -short): the tests that run the binary are parallel, so
// they start only after every serial test has ended, and otherwise the
// first of them would wait for the build there, on the package's
// critical path. With -run, the first test that needs it builds it.
//
// It also runs up to four parallel tests per core unless -test.parallel
// says otherwise (natstest.WaitingParallel): most of them wait on round
// trips, timers and worker processes.
func TestMain(m *testing.M) {
	if workertest.IsProgram() {
		worker.Main(context.Background(), worker.Config{Version: "0.1.0-dev"})
	}
	natstest.WaitingParallel()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" && !testing.Short() {
		go builtWorker.once.Do(build)
	}
	code := m.Run()
	builtWorker.once.Do(func() {}) // waits for a build under way
	if builtWorker.dir != "" {
		_ = os.RemoveAll(builtWorker.dir)
	}
	os.Exit(code)
}

// buildWorker builds the worker binary once per test binary run.
func buildWorker(t *testing.T) string {
	t.Helper()
	builtWorker.once.Do(build)
	if builtWorker.err != nil {
		t.Fatalf("building the worker: %v", builtWorker.err)
	}
	return builtWorker.bin
}

// build puts the worker program into builtWorker: a hard link (or a
// copy) of this test binary named "worker", which workertest.IsProgram makes
// package worker's Main, all cmd/worker is. A `go build -race` of
// cmd/worker linked the whole worker beside this package's tests.
func build() {
	dir, err := os.MkdirTemp("", "worker-bin-")
	if err != nil {
		builtWorker.err = err
		return
	}
	builtWorker.dir = dir
	bin := filepath.Join(dir, "worker")
	if err := workertest.CopySelf(bin); err != nil {
		builtWorker.err = err
		return
	}
	builtWorker.bin = bin
}

type process struct {
	name    string
	cmd     *exec.Cmd
	markDir string
}

func startProcess(t *testing.T, bin, url, name string, extra ...string) *process {
	t.Helper()
	return startProcessFiles(t, bin, url, name, nil, extra...)
}

func (p *process) marks(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(p.markDir, "marks.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// waitForInstances waits until n instances of the micro service answer a
// ping.
func waitForInstances(t *testing.T, nc *nats.Conn, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		inbox := nats.NewInbox()
		sub, err := nc.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.PublishRequest("$SRV.PING."+protocol.ServiceName, inbox, nil)
		got := 0
		for {
			if _, err := sub.NextMsg(300 * time.Millisecond); err != nil {
				break
			}
			got++
		}
		_ = sub.Unsubscribe()
		if got >= n {
			return
		}
	}
	t.Fatalf("fewer than %d worker instances answered", n)
}

// TestWorkerKilledMidCall runs two worker processes, kills one with
// SIGKILL while its non-read-only calls are running, and checks that
// every step still gets exactly one step.done, that no tool body ran
// twice, and that the calls cut short report interrupted.
func TestWorkerKilledMidCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs worker processes")
	}
	// Its worker processes mostly wait (leases, timers, restarts):
	// it runs beside the other process tests.
	t.Parallel()
	bin := buildWorker(t)
	s := natstest.Start(t)
	a := startProcess(t, bin, s.ClientURL(), "A")
	b := startProcess(t, bin, s.ClientURL(), "B")
	g := newGateway(t, s)
	waitForInstances(t, g.nc, 2)

	const steps = 12
	ev := g.watchSubject(protocol.StreamOutputs, protocol.PrefixOutput+".crash.>")
	for i := range steps {
		turnID := fmt.Sprintf("t%d", i)
		label := fmt.Sprintf("m%d", i)
		g.publish(protocol.Subject(protocol.PrefixCall, "crash", turnID), protocol.StepMsgID("crash", turnID, 0),
			map[string]any{"agent_id": "crash", "turn_id": turnID, "step": 0,
				"context": map[string]any{"kind": "text", "bindings": map[string]any{diagnostics.Binding: true}},
				"output": []any{
					map[string]any{"type": "function_call", "call_id": "mark", "name": "mark", "arguments": `{"label":"` + label + `","ms":3000}`},
					map[string]any{"type": "function_call", "call_id": "after", "name": "sleep", "arguments": `{"ms":10}`},
				}})
	}
	// Kill whichever worker has marks running, as soon as it has some.
	var victim, survivor *process
	waitFor(t, func() bool {
		switch {
		case len(a.marks(t)) > 0:
			victim, survivor = a, b
		case len(b.marks(t)) > 0:
			victim, survivor = b, a
		}
		return victim != nil
	}, "a mark to start")
	time.Sleep(200 * time.Millisecond) // let the victim take a few more steps
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	killedMarks := victim.marks(t)
	t.Logf("killed %s with %d marks running", victim.name, len(killedMarks))

	done := map[string]int{}
	outputs := map[string]map[string]event{}
	for len(done) < steps {
		e := ev.next()
		var id struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.Unmarshal(e.Raw, &id)
		switch e.Type {
		case protocol.EventStepDone:
			done[id.TurnID]++
		case protocol.EventCallOutput:
			if outputs[id.TurnID] == nil {
				outputs[id.TurnID] = map[string]event{}
			}
			outputs[id.TurnID][e.CallID] = e
		}
	}
	// Every mark body ran exactly once across both processes.
	all := append(killedMarks, survivor.marks(t)...)
	seen := map[string]int{}
	for _, m := range all {
		seen[m]++
	}
	for i := range steps {
		if n := seen[fmt.Sprintf("m%d", i)]; n != 1 {
			t.Errorf("mark m%d ran %d times", i, n)
		}
	}
	for _, m := range killedMarks {
		turnID := "t" + strings.TrimPrefix(m, "m")
		o := outputs[turnID]["mark"]
		if o.Error == nil || o.Error.Kind != "interrupted" {
			t.Errorf("%s: mark cut short by the kill reported %s, want interrupted", turnID, o.Raw)
		}
		if after := outputs[turnID]["after"]; after.Status != "ok" {
			t.Errorf("%s: the read-only call after it: %s", turnID, after.Raw)
		}
	}
	// And the stream holds exactly one step.done per step: count again
	// from the stream itself, after a pause for stragglers.
	time.Sleep(500 * time.Millisecond)
	counts := countStepDone(t, g.js, protocol.PrefixOutput+".crash.>")
	for i := range steps {
		if n := counts[fmt.Sprintf("t%d/0", i)]; n != 1 {
			t.Errorf("t%d has %d step.done events in the stream", i, n)
		}
	}
}

// countStepDone reads the outputs stream and counts step.done events by
// "<turn_id>/<step>", failing on a duplicate call.output.
func countStepDone(t *testing.T, js jetstream.JetStream, filter string) map[string]int {
	t.Helper()
	ctx := context.Background()
	c, err := js.OrderedConsumer(ctx, protocol.StreamOutputs, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := info.NumPending
	counts := map[string]int{}
	calls := map[string]bool{}
	for got := uint64(0); got < pending; {
		batch, err := c.Fetch(int(min(pending-got, 500)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var e struct {
				Type   string `json:"type"`
				TurnID string `json:"turn_id"`
				Step   int64  `json:"step"`
				CallID string `json:"call_id"`
			}
			if err := json.Unmarshal(m.Data(), &e); err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("%s/%d", e.TurnID, e.Step)
			switch e.Type {
			case protocol.EventStepDone:
				counts[key]++
			case protocol.EventCallOutput:
				if calls[key+"/"+e.CallID] {
					t.Errorf("duplicate call.output %s/%s", key, e.CallID)
				}
				calls[key+"/"+e.CallID] = true
			}
		}
		if n == 0 {
			t.Fatalf("read %d of %d events", got, pending)
		}
		got += uint64(n)
	}
	return counts
}

// TestServerRestartUnderLoad restarts the server on the same store while
// a thousand steps are in flight: every step gets exactly one
// step.done, none is lost and none doubled.
func TestServerRestartUnderLoad(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("load test")
	}
	s := natstest.Start(t)
	cfg := testConfig()
	cfg.Topology.MaxDeliver = 10
	startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	// 1000, not 2000: the restart still comes after 250 steps are done,
	// with hundreds published and in flight around it.
	const steps = 1000
	const perTurn = 100
	ev := g.watchSubject(protocol.StreamOutputs, protocol.PrefixOutput+".load.>")
	published := make(chan struct{})
	// The publisher stops when the test does, so that a test that fails
	// early is not failed again from a goroutine after it has ended.
	stop := make(chan struct{})
	defer func() { close(stop); <-published }()
	go func() {
		defer close(published)
		for i := range steps {
			select {
			case <-stop:
				return
			default:
			}
			turnID := fmt.Sprintf("t%d", i/perTurn)
			body, _ := json.Marshal(step("load", turnID, i%perTurn, fc("c", "ping", `{}`)))
			m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, "load", turnID))
			m.Data = body
			m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID("load", turnID, int64(i%perTurn)))
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := g.js.PublishMsg(ctx, m)
				cancel()
				if err == nil {
					break
				}
				if attempt > 100 {
					t.Errorf("publishing step %d: %v", i, err)
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}()
	seen := map[string]bool{}
	restarted := false
	deadline := time.After(3 * time.Minute)
	for len(seen) < steps {
		select {
		case e := <-ev.ch:
			if e.Type != protocol.EventStepDone {
				continue
			}
			var id struct {
				TurnID string `json:"turn_id"`
				Step   int64  `json:"step"`
			}
			_ = json.Unmarshal(e.Raw, &id)
			seen[fmt.Sprintf("%s/%d", id.TurnID, id.Step)] = true
			if !restarted && len(seen) >= steps/4 {
				restarted = true
				s.Restart()
				t.Logf("server restarted after %d steps done", len(seen))
			}
		case <-deadline:
			t.Fatalf("only %d of %d steps done", len(seen), steps)
		}
	}
	<-published
	time.Sleep(500 * time.Millisecond)
	counts := countStepDone(t, g.js, protocol.PrefixOutput+".load.>")
	if len(counts) != steps {
		t.Errorf("%d steps have a step.done in the stream, want %d", len(counts), steps)
	}
	for k, n := range counts {
		if n != 1 {
			t.Errorf("step %s has %d step.done events", k, n)
		}
	}
}
