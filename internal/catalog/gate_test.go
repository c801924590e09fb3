package catalog_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// Catalog requests are built concurrently within their bounds: while
// one key's flood is stuck (its catalogs never finish until released),
// other keys' requests are answered, at most PerKey of the flood are
// built at once, at most Total overall, and a flood beyond PerKey +
// Waiting is refused at once with 503 instead of piling up.
func TestCatalogFloodDoesNotStarveOtherKeys(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	release := make(chan struct{})
	var running, peak, floodPeak, floodRunning atomic.Int64
	build := func(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if req.Context.Fairness.Key == "flood" {
			f := floodRunning.Add(1)
			defer floodRunning.Add(-1)
			for p := floodPeak.Load(); f > p && !floodPeak.CompareAndSwap(p, f); p = floodPeak.Load() {
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return &protocol.CatalogReply{Tools: json.RawMessage(`[]`), Digest: req.AgentID}, nil
	}
	limits := catalog.Limits{PerKey: 2, Total: 4, Waiting: 8}
	svc, err := catalog.Serve(nc, catalog.Info{Version: "1.0.0", Limits: limits}, build, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	client := s.Connect(t)
	request := func(agent string, key string) (*nats.Msg, error) {
		c := protocol.Context{Kind: protocol.KindText, Fairness: protocol.Fairness{Key: key}}
		body, _ := json.Marshal(protocol.CatalogRequest{AgentID: agent, TurnID: "t1", Context: c})
		return client.Request(protocol.SubjectTools, body, 30*time.Second)
	}

	// The flood: 30 requests of one key (many agents, one tenant).
	const flood = 30
	codes := make(chan string, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Go(func() {
			m, err := request("flooder"+string(rune('a'+i%26)), "flood")
			if err != nil {
				codes <- "error: " + err.Error()
				return
			}
			codes <- m.Header.Get("Nats-Service-Error-Code")
		})
	}
	// The refused ones come back at once, while the admitted ones are
	// stuck: flood - (PerKey + Waiting) of them.
	refused := 0
	for refused < flood-(limits.PerKey+limits.Waiting) {
		select {
		case c := <-codes:
			if c != "503" {
				t.Fatalf("a flood request beyond the bound was answered %q, want 503", c)
			}
			refused++
		case <-time.After(20 * time.Second):
			t.Fatalf("only %d flood requests were refused", refused)
		}
	}
	// Other keys are answered while the flood is still stuck.
	for i := range 20 {
		m, err := request("quiet"+string(rune('a'+i)), "")
		if err != nil {
			t.Fatal(err)
		}
		var reply protocol.CatalogReply
		if err := json.Unmarshal(m.Data, &reply); err != nil || reply.Digest != "quiet"+string(rune('a'+i)) {
			t.Fatalf("quiet agent's reply %s (%v) headers %v", m.Data, err, m.Header)
		}
	}
	select {
	case c := <-codes:
		t.Fatalf("a flood request ended (%q) before it was released", c)
	default:
	}
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != "" {
			t.Errorf("an admitted flood request was answered %q, want a catalog", c)
		}
	}
	if floodPeak.Load() > int64(limits.PerKey) || peak.Load() > int64(limits.Total) {
		t.Errorf("at once: %d of the flood key (bound %d), %d in all (bound %d)", floodPeak.Load(), limits.PerKey, peak.Load(), limits.Total)
	}
	if floodPeak.Load() < int64(limits.PerKey) {
		t.Errorf("the flood key never had its %d slots (peak %d): requests are not concurrent", limits.PerKey, floodPeak.Load())
	}
}

// Two keys that flood at once, each over the total bound, take turns:
// both are served while both wait, neither after the other.
func TestCatalogTwoFloodsShare(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	var mu sync.Mutex
	var order []string
	gate := make(chan struct{})
	build := func(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error) {
		<-gate
		mu.Lock()
		order = append(order, req.Context.Fairness.Key)
		mu.Unlock()
		return &protocol.CatalogReply{Tools: json.RawMessage(`[]`)}, nil
	}
	svc, err := catalog.Serve(nc, catalog.Info{Version: "1.0.0", Limits: catalog.Limits{PerKey: 1, Total: 1, Waiting: 100}}, build, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Stop() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	client := s.Connect(t)
	var wg sync.WaitGroup
	send := func(key string, n int) {
		c := protocol.Context{Kind: protocol.KindText, Fairness: protocol.Fairness{Key: key}}
		body, _ := json.Marshal(protocol.CatalogRequest{AgentID: "a", TurnID: "t", Context: c})
		for range n {
			wg.Go(func() {
				if _, err := client.Request(protocol.SubjectTools, body, 60*time.Second); err != nil {
					t.Error(err)
				}
			})
		}
	}
	// A's 40 arrive first, then B's 10: arrival order would serve all of
	// A before any of B.
	inGate := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for catalog.InGate(svc) < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests reached the gate, want %d", catalog.InGate(svc), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	send("A", 40)
	inGate(40)
	send("B", 10)
	inGate(50)
	time.Sleep(50 * time.Millisecond) // from the count to the semaphore's queue
	close(gate)
	wg.Wait()
	// B's 10 are all served within the first 2*10+2 (one A, one B, ...).
	lastB := -1
	for i, k := range order {
		if k == "B" {
			lastB = i
		}
	}
	if len(order) != 50 || lastB > 22 {
		t.Errorf("served %d, the last of B's at %d, want by 22: %v", len(order), lastB, order)
	}
}
