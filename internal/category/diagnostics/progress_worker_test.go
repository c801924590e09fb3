package diagnostics_test

import (
	"encoding/json"
	"errors"
	"fmt"
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

// A long sleep that reports every millisecond streams progress over NATS
// as a gateway sees it: after started, in order, done never going back,
// at most one event per interval, then completed and nothing after.
func TestSleepStreamsProgressOverNATS(t *testing.T) {
	s := natstest.Start(t)
	workertest.RunWorker(t, s, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{})}, nil
	})
	g := workertest.NewGateway(t, s)
	sub, err := g.NC.SubscribeSync(protocol.Subject(protocol.PrefixActive, "a1", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	const ms = 2000
	start := time.Now()
	outs := g.Run("a1", "t1", 0, map[string]bool{diagnostics.Binding: true},
		workertest.FC("c1", "sleep", fmt.Sprintf(`{"ms":%d,"report_every_ms":1}`, ms)))
	elapsed := time.Since(start)
	if o := outs["c1"]; o.Status != "ok" {
		t.Fatalf("call.output %s", o.Raw)
	}

	var events []protocol.Activity
	for {
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the completed activity: %v (got %+v)", err, events)
		}
		var a protocol.Activity
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatalf("activity %s: %v", m.Data, err)
		}
		events = append(events, a)
		if a.State == protocol.ActivityCompleted {
			break
		}
	}
	// Anything published after completed would be due within an
	// interval of it.
	if m, err := sub.NextMsg(3 * turn.ProgressInterval); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("after completed: %v %s", err, msgData(m))
	}

	if events[0].State != protocol.ActivityStarted {
		t.Fatalf("first event %+v, want started", events[0])
	}
	progress := events[1 : len(events)-1]
	if len(progress) < 2 {
		t.Fatalf("%d progress events in a %d ms sleep: %+v", len(progress), ms, events)
	}
	if bound := int(elapsed/turn.ProgressInterval) + 2; len(progress) > bound {
		t.Fatalf("%d progress events in %v, over the rate limit's bound of %d", len(progress), elapsed, bound)
	}
	var prev int64
	for _, a := range progress {
		p := a.Progress
		if a.State != protocol.ActivityProgress || a.CallID != "c1" || a.Name != "sleep" || p == nil {
			t.Fatalf("event %+v", a)
		}
		if p.Done < prev || p.Done > ms || p.Total == nil || *p.Total != ms {
			t.Fatalf("progress %d/%v after %d", p.Done, p.Total, prev)
		}
		if want := fmt.Sprintf("Waited %d of %d ms", p.Done, ms); a.Label != want {
			t.Fatalf("label %q, want %q", a.Label, want)
		}
		prev = p.Done
	}
	t.Logf("%d progress events in %v", len(progress), elapsed)
}

func msgData(m *nats.Msg) string {
	if m == nil {
		return ""
	}
	return string(m.Data)
}
