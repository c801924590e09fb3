package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
)

// TestPubAcksAnswerGoesToItsOwnRequest times requests out around the
// moment their answers arrive, so that an answer is often both in its
// waiter's channel and late: a waiter given back with it still there
// would hand it to the next request. Every answer taken must be the
// echo of its own request.
func TestPubAcksAnswerGoesToItsOwnRequest(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	srv := s.Connect(t)
	sub, err := srv.Subscribe("echo", func(m *nats.Msg) {
		_ = m.Respond(m.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	a, err := newPubAcks(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var answered, timedOut int
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				want := fmt.Appendf(nil, "%d-%d", g, i)
				m := nats.NewMsg("echo")
				m.Data = want
				// From well before the answer to well after it; some
				// that cannot be answered in time, some that always are.
				timeout := time.Duration(1+i%20) * 100 * time.Microsecond
				switch i % 20 {
				case 0:
					timeout = time.Nanosecond
				case 19:
					timeout = 10 * time.Second
				}
				r, err := a.RequestMsg(m, timeout)
				mu.Lock()
				switch {
				case err == nil:
					answered++
					if !bytes.Equal(r.Data, want) {
						t.Errorf("request %s got the answer %s", want, r.Data)
					}
				case errors.Is(err, nats.ErrTimeout):
					timedOut++
				default:
					t.Errorf("request %s: %v", want, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("answered %d, timed out %d", answered, timedOut)
	if answered == 0 || timedOut == 0 {
		t.Fatalf("answered %d, timed out %d: the test needs both", answered, timedOut)
	}
}

// TestPubAcksClosedConnection: a request waiting when its connection
// closes fails with ErrConnectionClosed, not at its timeout, and a
// request after it fails at once.
func TestPubAcksClosedConnection(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	srv := s.Connect(t)
	if _, err := srv.Subscribe("never", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	nc := s.Connect(t)
	a, err := newPubAcks(nc)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		_, err := a.RequestMsg(nats.NewMsg("never"), 20*time.Second)
		got <- err
	}()
	for {
		a.mu.Lock()
		n := len(a.waiting)
		a.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	nc.Close()
	if err := <-got; !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("waiting request: got %v, want %v", err, nats.ErrConnectionClosed)
	}
	if _, err := a.RequestMsg(nats.NewMsg("never"), 20*time.Second); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("request after the close: got %v, want %v", err, nats.ErrConnectionClosed)
	}
}

// BenchmarkStoreMsg compares the two requesters over stored writes made
// by many goroutines at once, as a worker's handlers make them.
func BenchmarkStoreMsg(b *testing.B) {
	s := natstest.Start(b)
	js := s.JetStream(b)
	if _, err := js.CreateStream(b.Context(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		b.Fatal(err)
	}
	conn := s.Connect(b)
	acks, err := newPubAcks(s.Connect(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    requester
	}{{"RequestMsg", conn}, {"pubAcks", acks}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetParallelism(64)
			before := cpuTime()
			b.RunParallel(func(pb *testing.PB) {
				m := nats.NewMsg("s.x")
				m.Data = make([]byte, 300)
				for pb.Next() {
					if err := storeMsg(context.Background(), c.r, m, 5*time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
			// The process's CPU (the server's included), less noisy on a
			// shared machine than the wall time.
			b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
