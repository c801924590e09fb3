package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// One agent's burst of slow calls holds at most its bound of the slots
// (--key-steps): another agent's step still runs at once, every step gets
// exactly one step.done, and `nats micro stats` names the busy key with
// its steps in flight and waiting (held by the intake, or in the backlog).
func TestFairBurstLeavesSlotsForOthers(t *testing.T) {
	s := natstest.Start(t)
	cfg := testConfig()
	cfg.Concurrency, cfg.KeySteps = 8, 6
	w := startWorker(t, s, cfg, diagnostics.Category(diagnostics.Config{}))
	g := newGateway(t, s)
	done := g.watchSubject(protocol.StreamOutputs, protocol.PrefixOutput+".>")
	const burst = 60
	for i := range burst {
		g.sendStep("hog", fmt.Sprintf("t%d", i), 0, fc("c", "sleep", `{"ms":300}`))
	}
	// The hog has 6 running and the rest waiting (held here: 54 is
	// within the hold budget): the stats say so.
	nc := s.Connect(t)
	var stats struct {
		Endpoints []struct {
			Data struct {
				Fair map[string][]struct {
					Key      string `json:"key"`
					InFlight int64  `json:"in_flight"`
					Held     int64  `json:"held"`
					Backlog  int64  `json:"backlog"`
				} `json:"fair_share"`
			} `json:"data"`
		} `json:"endpoints"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := nc.Request(must(micro.ControlSubject(micro.StatsVerb, protocol.ServiceName, "")), nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		must(0, json.Unmarshal(m.Data, &stats))
		var ok bool
		if len(stats.Endpoints) > 0 {
			for _, k := range stats.Endpoints[0].Data.Fair[protocol.StreamCalls] {
				if k.Key == "hog" && k.InFlight > 0 && k.InFlight <= 6 && k.Held+k.Backlog > 0 {
					ok = true
				}
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stats never showed the hog's waiting steps: %s (%v)", m.Data, w.FairKeys(context.Background()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.sendStep("quiet", "q1", 0, fc("c", "ping", `{}`))
	seen := map[string]int{}
	var order []string
	for len(order) < burst+1 {
		ev := done.next()
		if ev.Type != "step.done" {
			continue
		}
		subj := ev.Header.Get("Nats-Msg-Id")
		seen[subj]++
		order = append(order, subj)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("%s: %d step.done", id, n)
		}
	}
	// The quiet step is done before the hog's last 40 (each hog step
	// takes 300 ms on 6 slots; the quiet one is a ping on a free slot).
	for i, id := range order {
		if strings.HasPrefix(id, "quiet.") {
			if i > burst-40 {
				t.Fatalf("the quiet step was done %dth of %d", i+1, len(order))
			}
			return
		}
	}
	t.Fatal("no step.done for the quiet step")
}
