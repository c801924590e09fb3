package repull

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// countingConsumer counts the consumer info the Keeper asks for.
type countingConsumer struct {
	jetstream.Consumer
	infos atomic.Int32
}

func (c *countingConsumer) Info(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c.infos.Add(1)
	return c.Consumer.Info(ctx)
}

// streamS starts a server with stream S (subjects s.>) and its durable
// consumer d.
func streamS(t *testing.T) (jetstream.JetStream, jetstream.Consumer) {
	t.Helper()
	js := natstest.Start(t).JetStream(t)
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateConsumer(t.Context(), "S", jetstream.ConsumerConfig{Durable: "d", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	return js, cons
}

// TestKeeperAsksOnlyAfterABurst: a Keeper asks the server nothing while
// nothing arrives, asks once the messages of a burst stop coming, and
// nothing more while idle again. A pull that ends by itself (its
// consumer deleted) ends Run with ErrEnded.
func TestKeeperAsksOnlyAfterABurst(t *testing.T) {
	t.Parallel()
	js, cons := streamS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	counted := &countingConsumer{Consumer: cons}
	k := &Keeper{Consumer: counted, Name: "S > d", Every: 10 * time.Millisecond}
	var taken atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- k.Run(ctx, func() (Pull, error) {
			return cons.Consume(func(m jetstream.Msg) {
				k.Taking()
				_ = m.Ack()
				taken.Add(1)
				k.Took()
			})
		})
	}()
	// Idle: a hundred looks at the pull, no question to the server.
	time.Sleep(time.Second)
	if n := counted.infos.Load(); n != 0 {
		t.Fatalf("an idle Keeper asked for the consumer's info %d times", n)
	}
	const burst = 50
	for i := range burst {
		if _, err := js.Publish(ctx, fmt.Sprintf("s.%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); taken.Load() < burst && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := taken.Load(); n < burst {
		t.Fatalf("%d of %d messages taken", n, burst)
	}
	// Asked once the burst stopped (more only if the burst came in parts,
	// each part asking once): wait until that is over, then, idle again,
	// nothing more.
	asked := counted.infos.Load()
	for deadline, still := time.Now().Add(30*time.Second), time.Now(); time.Since(still) < 500*time.Millisecond && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := counted.infos.Load(); n != asked || n == 0 {
			asked, still = n, time.Now()
		}
	}
	if asked == 0 {
		t.Fatal("the Keeper never looked at the consumer after the burst")
	}
	time.Sleep(time.Second)
	if n := counted.infos.Load(); n != asked {
		t.Fatalf("idle after the burst, the Keeper asked %d times more", n-asked)
	}
	if err := js.DeleteConsumer(ctx, "S", "d"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrEnded) {
			t.Fatalf("Run after the consumer's deletion: %v, want ErrEnded", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not end after its consumer was deleted")
	}
}

// TestStopLingersAtMostLinger: a stop while a message is being taken by
// a taker that does not heed it (a handler blocked on something else)
// returns after Linger, not when the taker is done.
func TestStopLingersAtMostLinger(t *testing.T) {
	t.Parallel()
	js, cons := streamS(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	k := &Keeper{Consumer: cons, Name: "S > d", Every: 10 * time.Millisecond, Linger: 200 * time.Millisecond}
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	done := make(chan error, 1)
	go func() {
		done <- k.Run(ctx, func() (Pull, error) {
			return cons.Consume(func(m jetstream.Msg) {
				k.Taking()
				close(entered)
				<-release // deaf to the stop
				k.Took()
			})
		})
	}()
	if _, err := js.Publish(t.Context(), "s.1", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the message was not taken")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Run did not return 30 s after the stop, with Linger %s", k.Linger)
	}
}
