package chaos

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// Fault is a kind of fault a run injects.
type Fault string

// The faults. A stopped node is shut down in-process (the server steps
// down from what it leads and closes its store) and started again on the
// same ports and store after Config.Downtime.
const (
	// FaultCallsLeader stops the node leading TURN_CALLS, then restarts it.
	FaultCallsLeader Fault = "calls-leader"
	// FaultOutputsLeader stops the node leading TURN_OUTPUTS, then restarts it.
	FaultOutputsLeader Fault = "outputs-leader"
	// FaultStateLeader stops the node leading the TURN_STATE bucket (the
	// call journal), then restarts it.
	FaultStateLeader Fault = "state-leader"
	// FaultWorkerKill SIGKILLs a worker process and starts a new one.
	FaultWorkerKill Fault = "worker-kill"
	// FaultRollingRestart restarts every node one by one, each once the
	// cluster is healthy again.
	FaultRollingRestart Fault = "rolling-restart"
)

// AllFaults is every kind, in the order a default plan injects them.
var AllFaults = []Fault{FaultCallsLeader, FaultWorkerKill, FaultOutputsLeader, FaultStateLeader, FaultRollingRestart}

// ParseFaults reads a comma-separated list of fault kinds; "all" is
// AllFaults.
func ParseFaults(s string) ([]Fault, error) {
	if s == "" || s == "all" {
		return AllFaults, nil
	}
	var out []Fault
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		found := false
		for _, k := range AllFaults {
			if Fault(f) == k {
				out, found = append(out, k), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown fault %q (kinds: %v)", f, AllFaults)
		}
	}
	return out, nil
}

// Config is one run.
type Config struct {
	// Cluster is the cluster to run against; every node must be running.
	Cluster *natstest.Cluster
	// WorkerBin is the cmd/worker binary (see BuildWorker).
	WorkerBin string
	// Dir holds the worker processes' mark directories and logs.
	Dir string
	// Workers is the number of worker processes (2).
	Workers int
	// Steps is the number of main-turn steps to publish; Duration is how
	// long to publish. With both, whichever comes first; one is needed.
	Steps    int
	Duration time.Duration
	// Rate bounds the main-turn steps published per second (0: no bound
	// but Concurrency).
	Rate float64
	// Concurrency bounds the main-turn steps published and not yet done
	// (64).
	Concurrency int
	// WorkflowEvery makes every n-th main-turn step call start_workflow
	// (25); negative: never.
	WorkflowEvery int
	// TasksPerWorkflow is the number of tasks of each workflow (2).
	TasksPerWorkflow int
	// MarkMS is how long each mark call waits after appending its label
	// (5 ms), which widens the window in which a kill cuts it short.
	MarkMS int
	// Faults is the plan, cycled (AllFaults); empty with NoFaults set
	// injects none.
	Faults   []Fault
	NoFaults bool
	// FaultEvery is the pause between faults. Zero spreads the plan
	// evenly over the publishing of Steps: fault i of n is injected once
	// (i+1)/(n+1) of the steps are published.
	FaultEvery time.Duration
	// HoldForFaults, with FaultEvery zero, makes the publishing wait at
	// each fault's share of the steps until that fault has begun: every
	// fault then begins while main-turn steps are still being published
	// however long the faults before it took, without a Rate slow enough
	// to cover the slowest machine (the tests use it; cmd/chaos does not).
	HoldForFaults bool
	// Downtime is how long a stopped node stays down (2 s).
	Downtime time.Duration
	// HealthTimeout bounds the wait for the cluster to be healthy again
	// after a node restart (3 min).
	HealthTimeout time.Duration
	// StallTimeout is how long the run waits for outstanding steps while
	// nothing progresses before it checks what it has (3 min; more than
	// the longest redelivery delay).
	StallTimeout time.Duration
	// NoFlood turns the flood off. By default the main turns are those of
	// several agents as the fair share sees them (context.fairness keys,
	// under the one agent id the checks read): one flooding key that
	// publishes FloodPercent of the main turns' steps, and QuietKeys quiet
	// ones sharing the rest, so that the fair share's reordering and
	// holding of steps is under the same faults as everything else.
	NoFlood bool
	// Agent is the agent id of every turn ("chaos").
	Agent string
	// Logger reports progress; nil discards it.
	Logger *slog.Logger
}

// Worker process settings: short leases so that a killed worker's steps
// come back quickly, and enough deliveries to outlast every fault.
const (
	workerAckWait    = 2 * time.Second
	workerMaxDeliver = 20
	workerGrace      = 2 * time.Second
	stepsPerTurn     = 10
	maxTaskSteps     = 6
	// FloodPercent of the main turns are the flooding key's (4 in 5); the
	// others are spread over QuietKeys keys.
	FloodPercent = 80
	QuietKeys    = 4
	// FloodKey is the flooding key; quiet keys are QuietKey0, QuietKey1, ….
	FloodKey = "agent-flood"
	QuietKey = "agent-quiet-"
)

func (c Config) withDefaults() Config {
	if c.Workers == 0 {
		c.Workers = 2
	}
	if c.Concurrency == 0 {
		c.Concurrency = 64
	}
	if c.WorkflowEvery == 0 {
		c.WorkflowEvery = 25
	}
	if c.TasksPerWorkflow == 0 {
		c.TasksPerWorkflow = 2
	}
	if c.MarkMS == 0 {
		c.MarkMS = 5
	}
	if len(c.Faults) == 0 && !c.NoFaults {
		c.Faults = AllFaults
	}
	if c.NoFaults {
		c.Faults = nil
	}
	if c.Downtime == 0 {
		c.Downtime = 2 * time.Second
	}
	if c.HealthTimeout == 0 {
		c.HealthTimeout = 3 * time.Minute
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = 3 * time.Minute
	}
	if c.Agent == "" {
		c.Agent = "chaos"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Cluster == nil || len(c.Cluster.Nodes) == 0 {
		errs = append(errs, errors.New("no cluster"))
	}
	if c.WorkerBin == "" {
		errs = append(errs, errors.New("no worker binary"))
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("no directory for marks and logs"))
	}
	if c.Steps <= 0 && c.Duration <= 0 {
		errs = append(errs, errors.New("give a number of steps or a duration"))
	}
	if c.Workers < 1 || c.Concurrency < 1 || c.TasksPerWorkflow < 1 || c.Rate < 0 {
		errs = append(errs, errors.New("workers, concurrency and tasks per workflow must be at least 1, the rate not negative"))
	}
	if c.FaultEvery == 0 && c.Steps <= 0 && len(c.Faults) > 0 {
		errs = append(errs, errors.New("a run by duration needs a fault interval"))
	}
	return errors.Join(errs...)
}
