package computer_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
)

// Two agents on a worker whose homes and JetStream store share one small
// file system (the embedded default at its worst). a1 fills its quota
// with a command: it is stopped, and a2's write_file step runs as
// always. Then the disk fills up entirely (a writer the quota does not
// see): a2's edit either happens or leaves its file whole, and once the
// space is back a2's steps work again without a restart.
func TestFullDiskTwoAgentsInWorker(t *testing.T) {
	needSandbox(t)
	disk := smallFS(t, "48m")
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: filepath.Join(disk, "js"),
		Reserve: 1 << 20, RecoverEvery: 200 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	c := newCategory(t, computer.Config{Root: filepath.Join(disk, "homes"), HomeQuotaBytes: 8 << 20, HomeQuotaFiles: 1000})
	h2 := home(t, c, "a2")
	old := strings.Repeat("a2's precious line\n", 10_000)
	writeFile(t, filepath.Join(h2, "data.txt"), old)

	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := engine.Config{Name: "w1", Grace: 5 * time.Second, Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 50}}
	w, err := engine.New(ctx, nc, cfg, turn.NewAssembler(c.Category()), nil, workertest.Logger())
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	gw, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	js, err := jetstream.New(gw)
	if err != nil {
		t.Fatal(err)
	}
	publish := func(agentID, turnID, name, args string, wait time.Duration) error {
		body, _ := json.Marshal(map[string]any{"agent_id": agentID, "turn_id": turnID, "step": 0,
			"context": map[string]any{"kind": "text", "bindings": map[string]bool{"computer": true}},
			"output":  []any{map[string]any{"type": "function_call", "call_id": "c1", "name": name, "arguments": args}}})
		m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agentID, turnID))
		m.Data = body
		m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agentID, turnID, 0))
		pctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_, err := js.PublishMsg(pctx, m)
		return err
	}
	output := func(agentID, turnID string, wait time.Duration) event {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			oc, err := js.OrderedConsumer(context.Background(), protocol.StreamOutputs,
				jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agentID, turnID)}})
			if err == nil {
				m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second))
				if err == nil {
					var ev event
					if err := json.Unmarshal(m.Data(), &ev); err != nil {
						t.Fatal(err)
					}
					return ev
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no call.output of %s/%s within %s: %v", agentID, turnID, wait, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// 1. a1 fills its quota; a2 notices nothing.
	if err := publish(agent, "fill", "run_command", `{"command":"i=0; while :; do head -c 1048576 /dev/zero > f$i || exit 1; i=$((i+1)); done"}`, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ev := output(agent, "fill", 60*time.Second)
	if ev.Error == nil || !strings.Contains(ev.Item.Output, "disk quota") {
		t.Errorf("a1's filling command: %+v", ev)
	}
	// The quota held: a1 is over by no more than twice the bound (one
	// run, with the store beside it), and the disk (48 MiB, the store's
	// included) has room for everyone else.
	if u, err := c.Usage(agent); err != nil || u.Bytes > u.QuotaBytes+2*maxOvershootBytes {
		t.Fatalf("a1's home after its fill: %+v %v, want at most %d KiB over", u, err, 2*maxOvershootBytes>>10)
	}
	bigger := strings.Repeat("a2's new line\n", 20_000)
	args, _ := json.Marshal(map[string]any{"path": "data.txt", "content": bigger})
	if err := publish("a2", "w1", "write_file", string(args), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if ev := output("a2", "w1", 60*time.Second); ev.Status != protocol.StatusOK {
		t.Fatalf("a2's write_file beside a1 over its quota: %+v", ev)
	}
	if got := readFile(t, filepath.Join(h2, "data.txt")); got != bigger {
		t.Fatalf("a2's file is %d bytes, want %d", len(got), len(bigger))
	}

	// 2. The disk fills up entirely.
	fill(t, filepath.Join(disk, "filler"))
	args, _ = json.Marshal(map[string]any{"path": "data.txt", "old_text": "new", "new_text": "newer, longer", "replace_all": true})
	_ = publish("a2", "e1", "edit_file", string(args), 5*time.Second) // the store may refuse it
	time.Sleep(2 * time.Second)
	if got := readFile(t, filepath.Join(h2, "data.txt")); got != bigger && got != strings.ReplaceAll(bigger, "new", "newer, longer") {
		t.Fatalf("on a full disk a2's file became %d bytes: neither the old content nor the new", len(got))
	}

	// 3. Space is back: a2's steps work again, by themselves.
	if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for publish("a2", "r1", "read_file", `{"path":"data.txt","end_line":1}`, 5*time.Second) != nil {
		if time.Now().After(deadline) {
			t.Fatal("steps cannot be published a minute after the disk has room again")
		}
	}
	if ev := output("a2", "r1", 60*time.Second); ev.Status != protocol.StatusOK || !strings.Contains(ev.Item.Output, "a2's new") {
		t.Fatalf("a2's read_file after the disk has room: %+v", ev)
	}
}
