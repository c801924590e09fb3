package turnstate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// wantStored fails the test unless stream holds n messages.
func wantStored(t *testing.T, js jetstream.JetStream, stream string, n uint64) {
	t.Helper()
	info, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().State.Msgs; got != n {
		t.Fatalf("%s holds %d messages, want %d", stream, got, n)
	}
}

// TestJournal runs the claim and stored-outcome cycle of a call on a real
// TURN_STATE bucket, including a claim of a key an operator deleted.
func TestJournal(t *testing.T) {
	t.Parallel()
	st, _ := turnState(t)
	kv := st.KV
	ctx := context.Background()
	ref := turn.JournalRef{AgentID: "a1", TurnID: "t1", Step: 1, CallID: "c1"}
	if o, err := st.Claim(ctx, ref); o != nil || err != nil {
		t.Fatalf("first claim: %v, %v", o, err)
	}
	if _, err := st.Claim(ctx, ref); !errors.Is(err, turn.ErrClaimed) {
		t.Fatalf("second claim: got %v, want ErrClaimed", err)
	}
	out := &turn.Outcome{CallID: "c1", Name: "noop", Item: json.RawMessage(`{"type":"function_call_output"}`)}
	if err := st.Store(ctx, ref, out); err != nil {
		t.Fatal(err)
	}
	got, err := st.Claim(ctx, ref)
	if err != nil || got == nil || got.Name != "noop" || string(got.Item) != string(out.Item) {
		t.Fatalf("claim after the outcome was stored: %+v, %v", got, err)
	}
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	e, err := kv.Get(ctx, key)
	if err != nil || !strings.Contains(string(e.Value()), `"state":"done"`) {
		t.Fatalf("stored record: %v, %v", e, err)
	}
	if err := kv.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if o, err := st.Claim(ctx, ref); o != nil || err != nil {
		t.Fatalf("claim of a deleted key: %v, %v", o, err)
	}
	if _, err := st.Claim(ctx, ref); !errors.Is(err, turn.ErrClaimed) {
		t.Fatalf("claim after reclaiming a deleted key: got %v, want ErrClaimed", err)
	}
	// A claim whose write landed but whose acknowledgement was lost finds
	// its own claim when it tries again: that is not an earlier attempt.
	ref.CallID = "c2"
	if o, err := st.claim(ctx, ref, "first"); o != nil || err != nil {
		t.Fatalf("claim: %v, %v", o, err)
	}
	if o, err := st.claim(ctx, ref, "first"); o != nil || err != nil {
		t.Fatalf("the same claim again: %v, %v", o, err)
	}
	if _, err := st.claim(ctx, ref, "second"); !errors.Is(err, turn.ErrClaimed) {
		t.Fatalf("another claim: got %v, want ErrClaimed", err)
	}
}

// TestRecord runs the one-write journal of read-only calls on a real
// TURN_STATE bucket: the first outcome stored is the one every attempt
// reports, a lost acknowledgement finds its own write, a claim without an
// outcome is written over, and a key of another call is refused as
// reused. Each case counts the bucket's writes.
func TestRecord(t *testing.T) {
	t.Parallel()
	st, js := turnState(t)
	kv := st.KV
	ctx := context.Background()
	stream := "KV_" + protocol.BucketState
	out := func(text string) *turn.Outcome {
		return &turn.Outcome{CallID: "c1", Name: "ping", Item: json.RawMessage(`{"type":"function_call_output","output":"` + text + `"}`)}
	}
	ref := turn.JournalRef{AgentID: "a1", TurnID: "t1", Step: 1, CallID: "c1", Digest: "d1"}
	if o, err := st.Record(ctx, ref, out("first")); o != nil || err != nil {
		t.Fatalf("first record: %v, %v", o, err)
	}
	wantStored(t, js, stream, 1)
	got, err := st.Record(ctx, ref, out("second"))
	if err != nil || got == nil || string(got.Item) != string(out("first").Item) {
		t.Fatalf("a second attempt's record: got %+v, %v; want the first outcome", got, err)
	}
	if got, err := st.Claim(ctx, ref); err != nil || got == nil || string(got.Item) != string(out("first").Item) {
		t.Fatalf("a claim of a recorded call: got %+v, %v; want the recorded outcome", got, err)
	}
	wantStored(t, js, stream, 1)
	// A write that landed with its acknowledgement lost, tried again.
	ref.CallID = "c2"
	if o, err := st.record(ctx, ref, out("mine"), "id1"); o != nil || err != nil {
		t.Fatalf("record: %v, %v", o, err)
	}
	if o, err := st.record(ctx, ref, out("mine"), "id1"); o != nil || err != nil {
		t.Fatalf("the same record again: got %v, %v; want its own write", o, err)
	}
	wantStored(t, js, stream, 2)
	// A claim with no outcome (an older worker, or one that died): the
	// outcome is stored over it, and a later claim is answered from it.
	ref.CallID = "c3"
	if o, err := st.Claim(ctx, ref); o != nil || err != nil {
		t.Fatalf("claim: %v, %v", o, err)
	}
	if o, err := st.Record(ctx, ref, out("over")); o != nil || err != nil {
		t.Fatalf("record over a claim: %v, %v", o, err)
	}
	if got, err := st.Claim(ctx, ref); err != nil || got == nil || string(got.Item) != string(out("over").Item) {
		t.Fatalf("claim after a record over a claim: %+v, %v", got, err)
	}
	// The id of another call.
	ref.Digest = "d2"
	if o, err := st.Record(ctx, ref, out("other")); !errors.Is(err, turn.ErrReused) || o != nil {
		t.Fatalf("record of another call under a used id: got %v, %v; want ErrReused", o, err)
	}
	// A key an operator deleted is recorded again.
	ref.Digest, ref.CallID = "d1", "c1"
	if err := kv.Delete(ctx, protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)); err != nil {
		t.Fatal(err)
	}
	if o, err := st.Record(ctx, ref, out("again")); o != nil || err != nil {
		t.Fatalf("record of a deleted key: %v, %v", o, err)
	}
}

// readBehind is a real bucket whose next reads report a key missing, as
// a replica that is behind does.
type readBehind struct {
	jetstream.KeyValue
	mu     sync.Mutex
	misses int
}

func (l *readBehind) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
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

// TestClaimReadBehind: a claim whose write is refused as "wrong last
// sequence" and whose read then misses the key (a replica behind, in a
// leader change) claims again rather than failing the call.
func TestClaimReadBehind(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if err := bus.Setup(ctx, js, bus.Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	real, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	l := &readBehind{KeyValue: real}
	st := &Store{KV: l, Pub: &bus.Publisher{JS: js}, Worker: "w1"}
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
