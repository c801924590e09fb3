// Command chaos proves the worker's delivery promises under faults for a
// chosen time: it starts a three-node JetStream cluster in this process
// (R3 streams, consumers and buckets) and worker processes on it, plays a
// gateway publishing steps and running workflow task turns, and injects
// faults on a schedule: the leader of TURN_CALLS, TURN_OUTPUTS or
// TURN_STATE stopped and restarted, a worker SIGKILLed and replaced,
// every server restarted one by one. At the end it reads back what is
// stored, prints the figures and exits 1 when any step was lost or
// doubled, a non-read-only tool body ran twice, a committed result is
// missing or a workflow write failed (a start_workflow that ended in an
// error other than interrupted, a submit_result whose value could not be
// recorded; see package internal/chaos).
//
//	go run ./cmd/chaos --duration 2m --workers 2 --fault-every 10s
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/agentbull/toolruntime/internal/chaos"
	"github.com/agentbull/toolruntime/internal/natstest"
)

func main() {
	var (
		o      chaos.Config
		nodes  int
		faults string
		dir    string
		keep   bool
	)
	flag.DurationVar(&o.Duration, "duration", 2*time.Minute, "how long to publish steps (then wait for every one)")
	flag.IntVar(&o.Steps, "steps", 0, "stop publishing after this many main-turn steps (0: no limit but --duration)")
	flag.IntVar(&o.Workers, "workers", 2, "worker processes")
	flag.IntVar(&nodes, "nodes", 3, "servers in the cluster")
	flag.Float64Var(&o.Rate, "steps-per-second", 0, "main-turn steps published per second at most (0: only --concurrency bounds them)")
	flag.IntVar(&o.Concurrency, "concurrency", 64, "main-turn steps published and not yet done, at most")
	flag.IntVar(&o.WorkflowEvery, "workflow-every", 25, "every n-th main-turn step starts a workflow (negative: none)")
	flag.IntVar(&o.TasksPerWorkflow, "tasks", 2, "tasks per workflow")
	flag.BoolVar(&o.NoFlood, "no-flood", false, "no flooding agent: every main turn under the default fairness key (by default 4 turns in 5 are one flooding key's, the rest 4 quiet keys')")
	flag.DurationVar(&o.FaultEvery, "fault-every", 10*time.Second, "pause between faults")
	flag.StringVar(&faults, "faults", "all", "fault kinds, cycled, comma-separated: calls-leader, worker-kill, outputs-leader, state-leader, rolling-restart (or all, or none)")
	flag.DurationVar(&o.Downtime, "downtime", 2*time.Second, "how long a stopped server stays down")
	flag.DurationVar(&o.StallTimeout, "stall-timeout", 3*time.Minute, "give up waiting for outstanding steps after this long without progress")
	flag.StringVar(&dir, "dir", "", "directory for the servers' stores, marks and worker logs (default: a temporary one)")
	flag.BoolVar(&keep, "keep", false, "keep the directory afterwards (always kept on failure)")
	workerBin := flag.String("worker-bin", "", "the worker binary (default: go build ./cmd/worker)")
	verbose := flag.Bool("v", false, "log progress")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, o, nodes, faults, dir, keep, *workerBin, *verbose)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
	}
	os.Exit(code)
}

func run(ctx context.Context, o chaos.Config, nodes int, faults, dir string, keep bool, workerBin string, verbose bool) (int, error) {
	if faults == "none" {
		o.NoFaults = true
	} else {
		fs, err := chaos.ParseFaults(faults)
		if err != nil {
			return 2, err
		}
		o.Faults = fs
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "chaos-")
		if err != nil {
			return 1, err
		}
		dir = d
	}
	ok := false
	defer func() {
		if ok && !keep {
			_ = os.RemoveAll(dir)
		} else {
			fmt.Fprintf(os.Stderr, "chaos: stores, marks and worker logs kept in %s\n", dir)
		}
	}()
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelInfo
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if workerBin == "" {
		var err error
		if workerBin, err = chaos.BuildWorker(ctx, dir); err != nil {
			return 1, err
		}
	}
	o.WorkerBin = workerBin
	o.Dir = filepath.Join(dir, "run")
	cluster, err := natstest.NewCluster(nodes, filepath.Join(dir, "cluster"))
	if err != nil {
		return 1, err
	}
	defer cluster.Shutdown()
	o.Cluster = cluster
	fmt.Printf("cluster of %d nodes (%s), %d worker processes, publishing for %s, a fault every %s\n",
		nodes, cluster.URL(), o.Workers, o.Duration, o.FaultEvery)
	rep, err := chaos.Run(ctx, o)
	if rep != nil {
		fmt.Print(rep)
	}
	if err != nil {
		return 1, err
	}
	if !rep.OK() {
		return 1, nil
	}
	ok = true
	return 0, nil
}
