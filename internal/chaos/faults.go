package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// leaderStream is the stream whose leader a leader fault stops.
var leaderStream = map[Fault]string{
	FaultCallsLeader:   protocol.StreamCalls,
	FaultOutputsLeader: protocol.StreamOutputs,
	FaultStateLeader:   "KV_" + protocol.BucketState,
}

// injector injects faults into the cluster and the fleet.
type injector struct {
	cfg     Config
	cluster *natstest.Cluster
	fleet   *fleet
	next    int // the worker slot the next worker-kill takes
}

// inject injects one fault and waits until the cluster is healthy again.
// It returns what it did, for the log.
func (in *injector) inject(ctx context.Context, f Fault) (string, error) {
	switch f {
	case FaultCallsLeader, FaultOutputsLeader, FaultStateLeader:
		stream := leaderStream[f]
		var node *natstest.Node
		if err := waitUntil(ctx, 30*time.Second, func() bool { node = in.cluster.StreamLeader(stream); return node != nil }); err != nil {
			return "", fmt.Errorf("%s has no leader to stop: %w", stream, err)
		}
		node.Stop()
		sleep(ctx, in.cfg.Downtime)
		if err := node.Start(); err != nil {
			return "", err
		}
		return fmt.Sprintf("stopped %s (leader of %s) for %s", node.Name, stream, in.cfg.Downtime), in.healthy(ctx)
	case FaultWorkerKill:
		slot := in.next % in.cfg.Workers
		in.next++
		name, err := in.fleet.kill(slot)
		return "SIGKILLed worker " + name + " and started another", err
	case FaultRollingRestart:
		for _, node := range in.cluster.Nodes {
			node.Stop()
			sleep(ctx, in.cfg.Downtime/2)
			if err := node.Start(); err != nil {
				return "", err
			}
			if err := in.healthy(ctx); err != nil {
				return "", fmt.Errorf("after restarting %s: %w", node.Name, err)
			}
		}
		return fmt.Sprintf("restarted all %d nodes one by one", len(in.cluster.Nodes)), nil
	}
	return "", fmt.Errorf("unknown fault %q", f)
}

// healthy waits until the cluster is healthy again.
func (in *injector) healthy(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, in.cfg.HealthTimeout)
	defer cancel()
	if err := in.cluster.WaitHealthy(hctx); err != nil {
		return fmt.Errorf("the cluster did not become healthy within %s: %w", in.cfg.HealthTimeout, err)
	}
	return nil
}

func waitUntil(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
