package deployments_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/backgroundjobs"
	"github.com/agentbull/toolruntime/internal/category/brain"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/category/schedules"
	"github.com/agentbull/toolruntime/internal/category/todo"
	"github.com/agentbull/toolruntime/internal/workflowtask"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// categories is what cmd/worker (package worker's DefaultCategories)
// builds before the worker, with its default
// flags (todo, brain, schedules and background jobs on), in its order.
// Each category creates or updates its own bucket or stream.
type categories struct {
	categories []tool.Category
	workflows  *workflowtask.Service
	jobs       *backgroundjobs.Service
}

// newCategories does what package worker's Run does between connecting and
// worker.New, with topo's replicas and storage.
func newCategories(ctx context.Context, js jetstream.JetStream, topo bus.Topology, log *slog.Logger) (*categories, error) {
	topo = topo.WithDefaults()
	c := &categories{}
	td, err := todo.New(ctx, js, todo.Config{Replicas: topo.Replicas, Storage: topo.Storage})
	if err != nil {
		return nil, fmt.Errorf("todo: %w", err)
	}
	br, err := brain.New(ctx, js, brain.Config{Replicas: topo.Replicas, Storage: topo.Storage})
	if err != nil {
		return nil, fmt.Errorf("brain: %w", err)
	}
	sc, err := schedules.New(ctx, js, schedules.Config{Replicas: topo.Replicas, Storage: topo.Storage})
	if err != nil {
		return nil, fmt.Errorf("schedules: %w", err)
	}
	if c.jobs, err = backgroundjobs.New(ctx, js, backgroundjobs.Config{Replicas: topo.Replicas, Storage: topo.Storage, Logger: log}); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	c.workflows = workflowtask.New(js, workflowtask.Config{Brain: br.Category(), Logger: log})
	c.categories = []tool.Category{td.Category(), br.Category(), sc.Category(), c.jobs.Category(), c.workflows.Category(), diagnostics.Category(diagnostics.Config{})}
	return c, nil
}

// setupAll creates or updates everything a worker creates at start: the
// categories' buckets and streams, then the protocol's (bus.Setup, which
// worker.New runs).
func setupAll(ctx context.Context, js jetstream.JetStream, topo bus.Topology) error {
	if _, err := newCategories(ctx, js, topo, testLogger()); err != nil {
		return err
	}
	return bus.Setup(ctx, js, topo.WithDefaults())
}

// The category resources, for the JetStream definition files.
var (
	categoryStreams   = []string{protocol.StreamSchedules, backgroundjobs.Stream}
	categoryBuckets   = []string{todo.Bucket, brain.Bucket, backgroundjobs.Bucket}
	categoryConsumers = map[string]string{backgroundjobs.Stream: backgroundjobs.ConsumerReports}
)
