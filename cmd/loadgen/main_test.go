package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// The load program against an embedded server and an in-process worker:
// every step it publishes gets its step.done, and every call succeeds.
func TestLoadRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	o := options{steps: 300, concurrency: 32, calls: 2, workers: 1, storage: "file", dataDir: t.TempDir(), out: &out}
	if err := run(ctx, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"steps=300 calls/step=2 sleep=0s", "call errors=0", "throughput="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// With --sleep the calls go to sleep: every step takes at least that long.
func TestLoadRunSleep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	o := options{steps: 40, concurrency: 8, calls: 1, sleep: 30 * time.Millisecond, workers: 1, storage: "memory", out: &out}
	if err := run(ctx, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "sleep=30ms") || !strings.Contains(out.String(), "call errors=0") {
		t.Fatalf("report:\n%s", out.String())
	}
	_, after, _ := strings.Cut(out.String(), "p50=")
	p50, err := time.ParseDuration(strings.Fields(after + " ")[0])
	if err != nil || p50 < 30*time.Millisecond {
		t.Fatalf("p50 %v (%v), want at least the 30ms the tool sleeps:\n%s", p50, err, out.String())
	}
}

// A step the stream refuses ends the run with the stream's answer, rather
// than a wait for a step.done that cannot come.
func TestLoadRunRefused(t *testing.T) {
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: protocol.StreamCalls, Subjects: []string{protocol.PrefixCall + ".>"}, MaxMsgs: 2, Discard: jetstream.DiscardNew,
	}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(ctx, options{url: s.ClientURL(), steps: 20, concurrency: 8, calls: 1, out: &out})
	if err == nil || !strings.Contains(err.Error(), "not stored") || !strings.Contains(err.Error(), "maximum messages") {
		t.Fatalf("run: %v, want the stream's refusal", err)
	}
}

// Against a worker without the diagnostics tools every call fails: the
// run fails too, and says what to do.
func TestLoadRunEveryCallFails(t *testing.T) {
	s := natstest.Start(t)
	stop := workertest.RunWorker(t, s, "plain", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return nil, nil
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, options{url: s.ClientURL(), steps: 20, concurrency: 8, calls: 2, out: &out})
	if err == nil || !strings.Contains(err.Error(), "every call failed (unknown_tool=40)") || !strings.Contains(err.Error(), "--diagnostics") {
		t.Fatalf("run: %v, want every call failed with the --diagnostics hint\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "call errors=40") {
		t.Errorf("report:\n%s", out.String())
	}
}

// A step published while no stream listens ("no responders": a restart,
// a leader change) is published again until one does.
func TestLoadRetriesNoResponders(t *testing.T) {
	s := natstest.Start(t)
	nc := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	retried := make(chan struct{})
	var once sync.Once
	var out bytes.Buffer
	o := options{steps: 5, concurrency: 5, calls: 1, out: &out, onRetry: func() { once.Do(func() { close(retried) }) }}
	errc := make(chan error, 1)
	go func() { errc <- drive(ctx, nc, o) }()
	select {
	case <-retried:
	case err := <-errc:
		t.Fatalf("drive ended before any retry: %v", err)
	case <-ctx.Done():
		t.Fatal("no publish was retried")
	}
	stop := workertest.RunWorker(t, s, "late", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{})}, nil
	})
	defer stop()
	if err := <-errc; err != nil {
		t.Fatalf("drive: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "call errors=0") || !strings.Contains(out.String(), "publishes retried after no responders") {
		t.Errorf("report:\n%s", out.String())
	}
}

// The cancel modes against an in-process worker: a user's running call is
// aborted behind a storm of other turns' cancels, and steps held for
// approval are all decided by cancels with large reasons.
func TestCancelModes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	o := options{steps: 1, concurrency: 1, workers: 1, storage: "memory", out: &out, cancelOpts: cancelOptions{storm: 500}}
	if err := run(ctx, o); err != nil {
		t.Fatalf("storm: %v\n%s", err, out.String())
	}
	o.cancelOpts = cancelOptions{pending: 8, reasonBytes: 200 << 10}
	if err := run(ctx, o); err != nil {
		t.Fatalf("pending: %v\n%s", err, out.String())
	}
	for _, want := range []string{"user's cancel to its aborted call.output", "last cancel mark stored",
		"steps done 8 of 8", "aborted calls 8, other outputs 0, records still pending 0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// --command runs against a worker with the computer tools: it refuses the
// in-process workers, which have only the diagnostics tools.
func TestLoadCommandNeedsWorker(t *testing.T) {
	err := run(context.Background(), options{steps: 1, concurrency: 1, command: "true", workers: 1, out: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "--computer-root") {
		t.Fatalf("run: %v, want a refusal naming --computer-root", err)
	}
}

// --command plays a gateway's loop of run_command steps against a worker
// with the computer tools (unconfined here: the sandbox's own tests are
// in internal/sandbox): every step is answered, every command succeeds.
func TestLoadCommand(t *testing.T) {
	s := natstest.Start(t)
	c, err := computer.New(computer.Config{Root: filepath.Join(t.TempDir(), "homes"), Unconfined: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := workertest.RunWorker(t, s, "computer", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{c.Category()}, nil
	})
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, options{url: s.ClientURL(), steps: 5, concurrency: 1, calls: 1, command: "true", out: &out}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{`steps=5 calls/step=1 command="true" concurrency=1`, "call errors=0"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
