package worker_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/chaos"
	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestClusterFaults is the proof under faults: two worker processes on a
// three-node cluster with R3 streams, consumers and buckets, 3000 main-turn
// steps (ping and mark, or start_workflow and the task turns it
// announces), and meanwhile the leaders of TURN_CALLS, TURN_OUTPUTS and
// TURN_STATE stopped and restarted, a worker SIGKILLed, and every node
// restarted one by one. Every step must get exactly one step.done, no
// non-read-only tool body may run twice, and no accepted result may be
// missing from WORKFLOWS (see package chaos for every check).
func TestClusterFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a three-node cluster and worker processes under faults")
	}
	// Its worker processes mostly wait (leases, timers, restarts):
	// it runs beside the other process tests.
	t.Parallel()
	bin := buildWorker(t)
	c := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, chaos.Config{
		Cluster: c, WorkerBin: bin, Dir: t.TempDir(),
		Workers: 2, Steps: 3000, Concurrency: 64,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil)),
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
	if rep.ResultsCommitted == 0 {
		t.Error("no workflow result was committed: the workflow part did not run")
	}
}

// testWriter writes the run's progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}

var _ io.Writer = testWriter{}
