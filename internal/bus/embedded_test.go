package bus_test

import (
	"context"

	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/workertest"
)

// A store whose disk fills up fails its writes; once the disk has room
// again the embedded server restarts by itself (same port and store) and the same
// stream and durable consumer go on, with what was stored before.
func TestEmbeddedStoreRecoversFromAFullDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("SKIPPING: a small tmpfs cannot be mounted here (%v): the full-disk test needs root or CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: filepath.Join(dir, "js"),
		Reserve: 1 << 20, RecoverEvery: 100 * time.Millisecond, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	cc, err := cons.Consume(func(m jetstream.Msg) { got.Add(1); _ = m.Ack() }, jetstream.PullHeartbeat(5*time.Second)) // as the worker's consumers pull
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	publish := func() error {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := js.Publish(pctx, "s.x", make([]byte, 1024))
		return err
	}
	if err := publish(); err != nil {
		t.Fatal(err)
	}

	// Fill the disk (as another agent's dd would), then write until the
	// store fails.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	failed := false
	for range 20_000 {
		if err := publish(); err != nil {
			t.Logf("publish on a full disk: %v", err)
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("the store never failed on a full disk")
	}
	before := got.Load()

	// Space back: publishing works again through the same connection (it
	// reconnects to the restarted server), and the consumer receives.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for publish() != nil {
		if time.Now().After(deadline) {
			t.Fatal("publishing still fails a minute after the disk has room again")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for got.Load() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("the durable consumer received nothing after the recovery (%d before)", before)
		}
		time.Sleep(50 * time.Millisecond)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs < 2 {
		t.Fatalf("the stream after the recovery: %+v %v", info, err)
	}
	if !strings.Contains(ns.StoreDir(), "js") {
		t.Errorf("store dir %q", ns.StoreDir())
	}
}
