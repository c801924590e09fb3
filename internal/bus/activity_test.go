package bus_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/protocol"
)

// An activity event is sent only while someone subscribes to it, on the
// embedded server: by its exact subject, by a wildcard, or not at all
// again once the subscriber left. The publisher's connection counts what
// it sends, so an event dropped at the server still counts.
func TestActivityOnlyWithInterest(t *testing.T) {
	t.Parallel()
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	connect := func() *nats.Conn {
		nc, err := nats.Connect(ns.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nc := connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := &bus.Publisher{JS: js, Interest: ns.Interest}
	ui := connect()
	sent := func(subscribe string) (uint64, *nats.Msg) {
		t.Helper()
		got := make(chan *nats.Msg, 4)
		if subscribe != "" {
			sub, err := ui.ChanSubscribe(subscribe, got)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe(); _ = ui.Flush() }()
			if err := ui.Flush(); err != nil { // the server has the subscription
				t.Fatal(err)
			}
		}
		before := nc.Stats().OutMsgs
		p.Activity("a1", "t1", protocol.Activity{CallID: "c1", Name: "probe", State: "started", Label: "Probing"})
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n := nc.Stats().OutMsgs - before
		if subscribe == "" {
			return n, nil
		}
		select {
		case m := <-got:
			return n, m
		case <-time.After(20 * time.Second):
			t.Fatalf("subscribed to %s: no activity arrived", subscribe)
			return n, nil
		}
	}
	if n, _ := sent(""); n != 0 {
		t.Errorf("nobody subscribes: %d messages sent, want 0", n)
	}
	for _, s := range []string{protocol.Subject(protocol.PrefixActive, "a1", "t1"), protocol.PrefixActive + ".>"} {
		n, m := sent(s)
		if n != 1 {
			t.Errorf("subscribed to %s: %d messages sent, want 1", s, n)
		}
		var a protocol.Activity
		if err := json.Unmarshal(m.Data, &a); err != nil || a.State != "started" || a.CallID != "c1" || a.Label != "Probing" {
			t.Errorf("subscribed to %s: got %s (%v)", s, m.Data, err)
		}
	}
	if n, _ := sent(""); n != 0 {
		t.Errorf("the subscriber left: %d messages sent, want 0", n)
	}
	// Without Interest (a server elsewhere) every event is sent.
	p.Interest = nil
	if n, _ := sent(""); n != 1 {
		t.Errorf("no Interest: %d messages sent, want 1", n)
	}
}
