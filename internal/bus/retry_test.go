package bus

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// lossy is a real bucket whose next writes lose their answer: the write
// is made (landed) or not (!landed), and the caller gets a timeout, as
// when a leader steps down under it.
type lossy struct {
	jetstream.KeyValue
	mu     sync.Mutex
	lose   int
	landed bool
	// misses is how many reads report a key missing, as a replica that
	// is behind does.
	misses int
}

func (l *lossy) fault() (lose, landed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lose == 0 {
		return false, false
	}
	l.lose--
	return true, l.landed
}

func (l *lossy) Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	lose, landed := l.fault()
	if lose && !landed {
		return 0, context.DeadlineExceeded
	}
	rev, err := l.KeyValue.Create(ctx, key, value, opts...)
	if lose {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (l *lossy) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	lose, landed := l.fault()
	if lose && !landed {
		return 0, context.DeadlineExceeded
	}
	rev, err := l.KeyValue.Update(ctx, key, value, revision)
	if lose {
		return 0, context.DeadlineExceeded
	}
	return rev, err
}

func (l *lossy) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	lose, landed := l.fault()
	if lose && !landed {
		return context.DeadlineExceeded
	}
	err := l.KeyValue.Delete(ctx, key, opts...)
	if lose {
		return context.DeadlineExceeded
	}
	return err
}

func (l *lossy) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	l.mu.Lock()
	miss := l.misses > 0
	if miss {
		l.misses--
	}
	l.mu.Unlock()
	if miss {
		return nil, jetstream.ErrKeyNotFound
	}
	return l.KeyValue.Get(ctx, key)
}

func (l *lossy) set(lose int, landed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lose, l.landed = lose, landed
}

// syncBuffer is a log the test reads while the code writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newBucket(t *testing.T, js jetstream.JetStream, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: name, History: 5})
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// TestRetryKV: a write whose answer was lost is tried again and reports
// its own earlier success, once; a conflict with another writer's value
// is the caller's and is not tried again.
func TestRetryKV(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	real := newBucket(t, js, "B")
	var log syncBuffer
	l := &lossy{KeyValue: real}
	kv := Retry{Logger: slog.New(slog.NewTextHandler(&log, nil))}.KV(js, l)
	wantAt := func(key, value string, rev uint64) {
		t.Helper()
		e, err := real.Get(ctx, key)
		if err != nil || string(e.Value()) != value || e.Revision() != rev {
			t.Fatalf("%s: got %v, %v; want %q at revision %d", key, e, err, value, rev)
		}
	}

	l.set(1, true)
	if rev, err := kv.Create(ctx, "k", []byte("v1")); err != nil || rev != 1 {
		t.Fatalf("create whose answer was lost: %d, %v; want revision 1", rev, err)
	}
	wantAt("k", "v1", 1)
	l.set(1, true)
	if rev, err := kv.Update(ctx, "k", []byte("v2"), 1); err != nil || rev != 2 {
		t.Fatalf("update whose answer was lost: %d, %v; want revision 2", rev, err)
	}
	wantAt("k", "v2", 2)
	if n := strings.Count(log.String(), "retrying"); n != 2 {
		t.Fatalf("%d retries logged, want 2:\n%s", n, log.String())
	}

	// Conflicts are answered at once, whoever wrote first.
	if _, err := kv.Create(ctx, "k", []byte("v3")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("create of an existing key: got %v, want ErrKeyExists", err)
	}
	if _, err := kv.Update(ctx, "k", []byte("v3"), 1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("update at an old revision: got %v, want ErrKeyRevisionMismatch", err)
	}
	// A retried write that did not land, and finds another's value, is
	// told of the conflict.
	l.set(1, false)
	if _, err := kv.Create(ctx, "k", []byte("v3")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("retried create of another's key: got %v, want ErrKeyExists", err)
	}
	l.set(1, false)
	if _, err := kv.Update(ctx, "k", []byte("v3"), 1); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("retried update at an old revision: got %v, want ErrKeyRevisionMismatch", err)
	}
	wantAt("k", "v2", 2)

	l.set(1, true)
	if err := kv.Delete(ctx, "k", jetstream.LastRevision(2)); err != nil {
		t.Fatalf("delete whose answer was lost: %v", err)
	}
	if _, err := real.Get(ctx, "k"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	// A read that misses asks the leader, which knows deleted and
	// missing keys, and has every value written.
	for _, key := range []string{"k", "nothing"} {
		if _, err := kv.Get(ctx, key); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Fatalf("%s: got %v, want ErrKeyNotFound at once", key, err)
		}
	}
	rev, err := real.Put(ctx, "k2", []byte("there"))
	if err != nil {
		t.Fatal(err)
	}
	l.misses = 1
	if e, err := kv.Get(ctx, "k2"); err != nil || string(e.Value()) != "there" || e.Revision() != rev || e.Key() != "k2" {
		t.Fatalf("a read a replica missed: %v, %v; want %q at revision %d", e, err, "there", rev)
	}
	if n := strings.Count(log.String(), "retrying"); n != 5 {
		t.Fatalf("%d retries logged, want one for each of the 5 lost answers:\n%s", n, log.String())
	}
}

// TestRetryRestart: a write made while the server is down is tried again
// until it is back, each attempt bounded by the attempt timeout.
func TestRetryRestart(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	real := newBucket(t, js, "R")
	var log syncBuffer
	kv := Retry{AttemptTimeout: 200 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))}.KV(js, real)
	s.Stop()
	done := make(chan error, 1)
	go func() {
		_, err := kv.Put(ctx, "p", []byte("x"))
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(log.String(), "retrying"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no retry while the server was down")
		}
	}
	s.Restart()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("put across a restart: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("put did not land once the server was back")
	}
	if e, err := kv.Get(ctx, "p"); err != nil || string(e.Value()) != "x" {
		t.Fatalf("after the restart: %v, %v", e, err)
	}
}

// TestRetryWatch: a watch is read to its end; an error of the reader ends
// it without a retry.
func TestRetryWatch(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	kv := newBucket(t, js, "W")
	for _, k := range []string{"a.1", "a.2", "b.1"} {
		if _, err := kv.Put(ctx, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := Retry{}.Watch(ctx, "a", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		return kv.Watch(ctx, "a.*")
	}, func(e jetstream.KeyValueEntry) error {
		got = append(got, e.Key())
		return nil
	})
	if err != nil || strings.Join(got, ",") != "a.1,a.2" {
		t.Fatalf("watch: %v, %v", got, err)
	}
	stop := errors.New("enough")
	starts := 0
	err = Retry{}.Watch(ctx, "a", func(ctx context.Context) (jetstream.KeyWatcher, error) {
		starts++
		return kv.Watch(ctx, "a.*")
	}, func(jetstream.KeyValueEntry) error { return stop })
	if !errors.Is(err, stop) || starts != 1 {
		t.Fatalf("a reader's error: %v after %d starts, want it after 1", err, starts)
	}
}

// TestClaimReadBehind: a claim whose write is refused as "wrong last
// sequence" and whose read then misses the key (a replica behind, in a
// leader change) claims again rather than failing the call.
func TestClaimReadBehind(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if err := Setup(ctx, js, Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	real, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	l := &lossy{KeyValue: real}
	st := &TurnState{KV: l, Pub: &Publisher{JS: js}, Worker: "w1"}
	ref := turn.JournalRef{AgentID: "a1", TurnID: "t1", Step: 1, CallID: "c1"}
	// The first attempt's write landed and its answer was lost: the claim
	// is tried again with its id.
	if o, err := st.claim(ctx, ref, "mine"); o != nil || err != nil {
		t.Fatalf("claim: %v, %v", o, err)
	}
	l.misses = 1
	if o, err := st.claim(ctx, ref, "mine"); o != nil || err != nil {
		t.Fatalf("the claim again, its first read missing the key: %v, %v", o, err)
	}
	l.misses = 1
	if _, err := st.claim(ctx, ref, "theirs"); !errors.Is(err, turn.ErrClaimed) {
		t.Fatalf("another claim, its first read missing the key: got %v, want ErrClaimed", err)
	}
	// However far behind the replicas are, the leader has the claim.
	l.misses = 1 << 30
	if o, err := st.claim(ctx, ref, "mine"); o != nil || err != nil {
		t.Fatalf("the claim again, no replica having the key: %v, %v", o, err)
	}
	if _, err := st.claim(ctx, ref, "theirs"); !errors.Is(err, turn.ErrClaimed) {
		t.Fatalf("another claim, no replica having the key: got %v, want ErrClaimed", err)
	}
}
