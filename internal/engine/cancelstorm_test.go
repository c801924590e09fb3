package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// asyncErrors records a connection's asynchronous errors (a slow
// consumer's dropped messages among them).
type asyncErrors struct {
	mu   sync.Mutex
	errs []error
}

func (a *asyncErrors) handler(_ *nats.Conn, sub *nats.Subscription, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sub != nil {
		err = fmt.Errorf("%s: %w", sub.Subject, err)
	}
	a.errs = append(a.errs, err)
}

func (a *asyncErrors) get() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}

// startWorkerWatched is startWorker on a connection whose asynchronous
// errors are recorded.
func startWorkerWatched(t *testing.T, s *natstest.Server, cfg engine.Config, categories ...tool.Category) *asyncErrors {
	t.Helper()
	errs := &asyncErrors{}
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ErrorHandler(errs.handler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(categories...), nil, workertest.Logger())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker.Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("worker did not stop")
		}
	})
	workertest.WaitForService(t, nc)
	return errs
}

func checkNothingDropped(t *testing.T, s *natstest.Server, errs *asyncErrors) {
	t.Helper()
	for _, err := range errs.get() {
		if errors.Is(err, nats.ErrSlowConsumer) {
			t.Errorf("the worker's connection dropped messages: %v", err)
		}
	}
	if n := s.NumSlowConsumers(); n != 0 {
		t.Errorf("the server counted %d slow consumers", n)
	}
}

// A user's cancel of a running call, published behind 3,000 cancels of
// other turns (none running here), aborts the call: the storm's cancels
// cost the worker a map lookup each before the real one is read, and
// their marks are written off the subscription. The latency from the
// real cancel's publish to its call.output is logged, not asserted.
func TestCancelStormDoesNotDelayARunningCall(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	errs := startWorkerWatched(t, s, testConfig(), diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	started := make(chan *nats.Msg, 10)
	sub := must(g.nc.ChanSubscribe(protocol.Subject(protocol.PrefixActive, "user", "real"), started))
	defer sub.Unsubscribe()
	ev := g.watch("user", "real")
	g.sendStep("user", "real", 0, fc("c1", "sleep", `{"ms":120000}`))
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never started")
	}
	_ = sub.Unsubscribe() // its progress would fill the channel

	storm := s.Connect(t)
	// 3,000, not 30,000: the real cancel is read after every one of them
	// and every mark is written either way, and the tenth of the volume
	// is most of this test's time under -race.
	const others = 3000
	for i := range others {
		subject := protocol.Subject(protocol.PrefixCancel, fmt.Sprintf("agent%d", i%500), fmt.Sprintf("turn%d", i))
		if err := storm.Publish(subject, []byte(`{"reason":"the workflow was stopped"}`)); err != nil {
			t.Fatal(err)
		}
	}
	// Behind the storm, on the same connection: the worker reads it after
	// every one of them.
	sent := time.Now()
	if err := storm.Publish(protocol.Subject(protocol.PrefixCancel, "user", "real"), []byte(`{"reason":"user pressed stop"}`)); err != nil {
		t.Fatal(err)
	}
	if err := storm.Flush(); err != nil {
		t.Fatal(err)
	}
	out := ev.next()
	latency := time.Since(sent)
	if out.Type != protocol.EventCallOutput || out.Error == nil || out.Error.Kind != "aborted" || !strings.Contains(out.Error.Message, "user pressed stop") {
		t.Fatalf("the cancelled call's output: %s", out.Raw)
	}
	t.Logf("cancel latency behind %d other turns' cancels: %s", others, latency)
	if _, done := ev.untilDone(); !done.EndTurn {
		t.Errorf("step.done %s", done.Raw)
	}
	// The storm's marks reach the bucket too: a later step of one of
	// those turns, on any worker, is aborted.
	kv := must(g.js.KeyValue(context.Background(), protocol.BucketState))
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		_, err := kv.Get(context.Background(), protocol.TurnKey("agent499", fmt.Sprintf("turn%d", others-1), "cancel"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last storm cancel's mark is not in TURN_STATE: %v", err)
		}
	}
	checkNothingDropped(t, s, errs)
}

// 100 cancels with reasons of 900 KB each, published at once (90 MB,
// 1.4 times the client's default pending limit of a subscription), for 100
// turns whose steps wait for approval: every step is decided aborted,
// none stays pending, nothing is dropped, and the reason the model reads
// is clipped.
func TestCancelStormOfPendingSteps(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	markDir := t.TempDir()
	cfg := testConfig()
	cfg.Approval = turn.Policy{Names: []string{"mark"}}
	errs := startWorkerWatched(t, s, cfg, diagnostics.Category(diagnostics.Config{MarkDir: markDir}))
	g := newGateway(t, s)
	ev := g.watchSubject(protocol.StreamOutputs, protocol.PrefixOutput+".a1.>")
	const turns = 100
	for i := range turns {
		g.sendStep("a1", fmt.Sprintf("t%d", i), 0, fc("c1", "mark", `{"label":"x"}`))
	}
	for pending := 0; pending < turns; {
		if e := ev.next(); e.Type == protocol.EventStepPending {
			pending++
		} else {
			t.Fatalf("before the cancels: %s", e.Raw)
		}
	}
	reason := strings.Repeat("r", 900<<10)
	body, _ := json.Marshal(protocol.Cancel{Reason: reason})
	storm := s.Connect(t)
	for i := range turns {
		if err := storm.Publish(protocol.Subject(protocol.PrefixCancel, "a1", fmt.Sprintf("t%d", i)), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := storm.Flush(); err != nil {
		t.Fatal(err)
	}
	aborted := map[string]bool{}
	for done := 0; done < turns; {
		e := ev.next()
		var turnID struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.Unmarshal(e.Raw, &turnID)
		switch e.Type {
		case protocol.EventCallOutput:
			if e.Error == nil || e.Error.Kind != "aborted" {
				t.Errorf("%s: %s", turnID.TurnID, e.Raw)
			}
			if len(e.Raw) > 8<<10 {
				t.Errorf("%s: a call.output of %d bytes: the reason is not clipped", turnID.TurnID, len(e.Raw))
			}
			aborted[turnID.TurnID] = true
		case protocol.EventStepDone:
			done++
		default:
			t.Fatalf("unexpected event %s", e.Raw)
		}
	}
	if len(aborted) != turns {
		t.Errorf("%d turns' calls aborted, want %d", len(aborted), turns)
	}
	// Every record is decided.
	kv := must(g.js.KeyValue(context.Background(), protocol.BucketState))
	for i := range turns {
		e, err := kv.Get(context.Background(), "approval.a1."+fmt.Sprintf("t%d", i)+".0")
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var p turn.PendingStep
		if err := json.Unmarshal(e.Value(), &p); err != nil || p.Resolution == nil {
			t.Errorf("turn t%d's step is still pending: %s", i, e.Value())
		}
	}
	ev.quiet(300 * time.Millisecond)
	checkNothingDropped(t, s, errs)
}
