package bus

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// BenchmarkActivity is the CPU an activity event nobody subscribes to
// costs the worker process with its embedded server: sent (the client's
// write, the server's read, parse and match) or looked up and left
// (Interest). A no-op step has two.
func BenchmarkActivity(b *testing.B) {
	ns, err := StartEmbedded(EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		interest func(string) bool
	}{{"sent", nil}, {"interest", ns.Interest}} {
		b.Run(c.name, func(b *testing.B) {
			p := &Publisher{JS: js, Interest: c.interest}
			a := protocol.Activity{CallID: "call_0123456789", Name: "sleep", State: "started", Label: "Waiting 0 ms"}
			b.SetParallelism(64)
			before := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p.Activity("agent-0123", "turn-0123456789", a)
				}
			})
			if err := nc.Flush(); err != nil { // the server has read them all
				b.Fatal(err)
			}
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
		})
	}
}
