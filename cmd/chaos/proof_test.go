package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/chaos"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/worker"
)

// TestClusterFaults is the proof under faults: two worker processes on a
// three-node cluster with R3 streams, consumers and buckets, 600 main-turn
// steps (ping and mark, or start_workflow and the task turns it
// announces), and meanwhile the leaders of TURN_CALLS, TURN_OUTPUTS and
// TURN_STATE stopped and restarted, a worker SIGKILLed, and every node
// restarted one by one. Every step must get exactly one step.done, no
// non-read-only tool body may run twice, and no accepted result may be
// missing from WORKFLOWS (see package chaos for every check).
//
// What a fault meets is the steps in flight (up to Concurrency) and the
// steps published while it lasts, not the steps between faults: 600
// steps put one fault every 100, more than the 64 in flight, so that each
// fault meets a window of steps published after the fault before it
// (1000 steps did the same at two thirds more cost: the three nodes run
// in this -race process), and every fault must begin while main-turn
// steps are still being published. The publishing is paced by
// the faults, not by the clock (HoldForFaults): it runs as fast as
// Concurrency lets it and waits at each fault's share until that fault
// has begun, so that a slow fault on a loaded machine cannot fall behind
// the publishing, and a fast machine does not wait out a fixed rate
// (the program runs longer proofs). It lives with the program, whose
// package sorts early in ./...: its worker processes and three nodes run
// beside the first packages' tests rather than at the end of the suite.
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster and worker processes under faults")
	}
	bin := workerProgram(t)
	c := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// steps/(faults+1) must stay above Concurrency (64).
	const steps = 600
	faults := &faultLog{Handler: slog.NewTextHandler(testWriter{t}, nil)}
	rep, err := chaos.Run(ctx, chaos.Config{
		Cluster: c, WorkerBin: bin, Dir: t.TempDir(),
		Workers: 2, Steps: steps, Concurrency: 64, HoldForFaults: true,
		Logger: slog.New(faults),
	})
	if rep != nil {
		t.Logf("report:\n%s", rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems() {
		t.Error(p)
	}
	for _, f := range chaos.AllFaults {
		if rep.Faults[f] == 0 {
			t.Errorf("fault %s was not injected", f)
		}
	}
	injectedFaults := 0
	for _, n := range rep.Faults {
		injectedFaults += n
	}
	if got := faults.get(); len(got) != injectedFaults {
		t.Errorf("the log shows %d faults injected, the report %d", len(got), injectedFaults)
	}
	for _, f := range faults.get() {
		if f.published < 0 || f.published >= steps {
			t.Errorf("fault %s began once all %d main-turn steps were published: it met no publishing (published: %d)", f.kind, steps, f.published)
		}
	}
	if rep.ResultsCommitted == 0 {
		t.Error("no workflow result was committed: the workflow part did not run")
	}
}

// workerEnv, set in a process's environment, makes this test binary the
// worker program (see TestMain).
const workerEnv = "CHAOS_TEST_RUN_WORKER"

// TestMain runs the worker program instead of the tests when workerEnv
// is set: the worker processes of TestClusterFaults are this binary.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		worker.Main(context.Background(), worker.Config{Version: "0.1.0-dev"})
	}
	os.Exit(m.Run())
}

// workerProgram returns the worker program the faults are injected into:
// this test binary, which runs package worker's Main as cmd/worker does
// (cmd/worker is that one call) when workerEnv is set. The worker
// processes inherit the environment (package chaos starts them with
// exec.Command and no Env of its own), so setting workerEnv here reaches
// them. Building cmd/worker with the go command instead took tens of
// seconds of a loaded machine: the link of a -race binary, and, early in
// `go test ./...`, compiling the worker's packages a second time beside the
// suite's own compile of them (this package sorts early).
func workerProgram(t *testing.T) string {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(workerEnv, "1")
	return bin
}

// testWriter writes the run's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

var _ io.Writer = testWriter{}

// faultLog is the run's log handler, which also records each fault
// injected with the number of main-turn steps published when it began.
type faultLog struct {
	slog.Handler
	mu     sync.Mutex
	faults []injected
}

type injected struct {
	kind      string
	published int64
}

func (h *faultLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "fault injected" {
		f := injected{published: -1}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "kind":
				f.kind = a.Value.String()
			case "published":
				if a.Value.Kind() == slog.KindInt64 {
					f.published = a.Value.Int64()
				}
			}
			return true
		})
		h.mu.Lock()
		h.faults = append(h.faults, f)
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h *faultLog) get() []injected {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]injected(nil), h.faults...)
}
