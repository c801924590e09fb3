package bus

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestEmbeddedKeepsNoSubjectCache: a worker's subjects are new at almost
// every message, so the embedded server must not cache their matches
// (filling and pruning the cache took its write lock on every publish).
// With the cache, each distinct subject published to is kept in it.
func TestEmbeddedKeepsNoSubjectCache(t *testing.T) {
	t.Parallel()
	e, err := StartEmbedded(EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	got := make(chan struct{}, 64)
	if _, err := nc.Subscribe("turn.activity.>", func(*nats.Msg) { got <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		if err := nc.Publish(fmt.Sprintf("turn.activity.a.t%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 64 {
		<-got
	}
	sz, err := e.server().Subsz(nil)
	if err != nil {
		t.Fatal(err)
	}
	if sz.NumCache != 0 {
		t.Fatalf("the server cached %d subject matches, want none", sz.NumCache)
	}
}
