package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// TestStoreMsg checks the acknowledgements storeMsg reads without
// decoding, and the errors it decodes, against a real server.
func TestStoreMsg(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	msg := func(subject, id, lastSubjSeq string) *nats.Msg {
		m := nats.NewMsg(subject)
		m.Data = []byte("x")
		if id != "" {
			m.Header.Set(jetstream.MsgIDHeader, id)
		}
		if lastSubjSeq != "" {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, lastSubjSeq)
		}
		return m
	}
	if err := storeMsg(ctx, nc, msg("s.a", "one", "0"), time.Second); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := storeMsg(ctx, nc, msg("s.a", "one", ""), time.Second); err != nil {
		t.Fatalf("duplicate of a stored message: %v", err)
	}
	err := storeMsg(ctx, nc, msg("s.a", "two", "0"), time.Second)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("create of an existing subject: got %v, want API error %d", err, jetstream.JSErrCodeStreamWrongLastSequence)
	}
	if err := storeMsg(ctx, nc, msg("nowhere", "", ""), time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("publish to no stream: got %v, want no responders", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := storeMsg(cancelled, nc, msg("s.b", "", ""), time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if err := storeMsg(context.WithoutCancel(past), nc, msg("s.b", "", ""), time.Second); err != nil {
		t.Fatalf("a context without cancel: %v", err)
	}
	if err := storeMsg(past, nc, msg("s.b", "", ""), time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: got %v", err)
	}
	wantStored(t, js, "S", 2)
}

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

// FuzzPubAckError: any answer is read as stored or as an error, never a
// panic; and it is read as stored only when it says so.
func FuzzPubAckError(f *testing.F) {
	for _, s := range []string{
		`{"stream":"S", "domain":"", "seq":12}`,
		`{"stream":"S","seq":3,"duplicate":true}`,
		`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 1"},"stream":"S","seq":0}`,
		`{"error":{"code":503,"description":"JetStream system temporarily unavailable"}}`,
		`{"seq":1}`, `{}`, `not json`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := PubAckError(data)
		if err != nil {
			return
		}
		if strings.HasPrefix(string(data), `{"stream":`) {
			return
		}
		var ack struct {
			Error  json.RawMessage `json:"error"`
			Stream string          `json:"stream"`
		}
		if json.Unmarshal(data, &ack) != nil || ack.Stream == "" || (len(ack.Error) > 0 && string(ack.Error) != "null") {
			t.Fatalf("read %q as stored", data)
		}
	})
}

// TestPublishRetries: a publish that finds no stream is tried again until
// the stream is there; one the stream refuses is not.
func TestPublishRetries(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	p := &Publisher{JS: js, MaxElapsed: 20 * time.Second}
	done := make(chan error, 1)
	go func() { done <- p.Event(ctx, "late.a", "id-1", map[string]int{"n": 1}) }()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("publish returned %v before there was a stream", err)
	default:
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "LATE", Subjects: []string{"late.>"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("publish: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("publish did not land once the stream was there")
	}
	m := nats.NewMsg("late.a")
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	var log bytes.Buffer
	p.Logger = slog.New(slog.NewTextHandler(&log, nil))
	var apiErr *jetstream.APIError
	if err := p.publish(ctx, m); !errors.As(err, &apiErr) {
		t.Fatalf("a refused publish: got %v, want the API error", err)
	}
	if log.Len() > 0 {
		t.Fatalf("a refused publish was tried again:\n%s", log.String())
	}
	wantStored(t, js, "LATE", 1)
}

// TestPublisherBuffers: events published at once from many goroutines,
// each written into a buffer another event used before, are stored as
// json.Marshal writes them, every one, and activity events arrive whole.
func TestPublisherBuffers(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	js := s.JetStream(t)
	ctx := context.Background()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{protocol.PrefixOutput + ".>"}})
	if err != nil {
		t.Fatal(err)
	}
	active := make(chan *nats.Msg, 1024)
	if _, err := nc.ChanSubscribe(protocol.PrefixActive+".>", active); err != nil {
		t.Fatal(err)
	}
	p := &Publisher{JS: js}
	const writers, each = 8, 40
	want := map[string][]byte{}
	events := make([][]any, writers)
	for w := range writers {
		for i := range each {
			id := fmt.Sprintf("c%d-%d", w, i)
			item := json.RawMessage(`{"type":"function_call_output","call_id":"` + id + `","output":"` + strings.Repeat("x", (w*each+i)%300) + `"}`)
			var ev any = &protocol.CallOutput{Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", Step: int64(i), CallID: id, Name: "ping", Status: protocol.StatusOK, Item: item}
			if i%3 == 0 {
				ev = &protocol.StepDone{Type: protocol.EventStepDone, AgentID: "a", TurnID: "t", Step: int64(w*each + i), Items: []json.RawMessage{item, item}}
			}
			data, _ := json.Marshal(ev)
			want[id] = data
			events[w] = append(events[w], ev)
		}
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i, ev := range events[w] {
				id := fmt.Sprintf("c%d-%d", w, i)
				if err := p.Event(ctx, protocol.Subject(protocol.PrefixOutput, "a", "t"), id, ev); err != nil {
					t.Error(err)
				}
				p.Activity("a", "t", protocol.Activity{CallID: id, Name: "ping", State: "started", Label: strings.Repeat("y", i)})
			}
		})
	}
	wg.Wait()
	wantStored(t, js, "OUT", writers*each)
	for seq := uint64(1); seq <= writers*each; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(jetstream.MsgIDHeader)
		if !bytes.Equal(m.Data, want[id]) {
			t.Fatalf("event %s stored as %s, want %s", id, m.Data, want[id])
		}
	}
	for range writers * each {
		var m *nats.Msg
		select {
		case m = <-active:
		case <-time.After(30 * time.Second): // a guard against a hang, not a measure
			t.Fatal("activity events missing")
		}
		var a protocol.Activity
		if err := json.Unmarshal(m.Data, &a); err != nil {
			t.Fatalf("activity %s: %v", m.Data, err)
		}
		var w, i int
		if _, err := fmt.Sscanf(a.CallID, "c%d-%d", &w, &i); err != nil || a.Label != strings.Repeat("y", i) {
			t.Fatalf("activity %s does not match its call id", m.Data)
		}
	}
}
