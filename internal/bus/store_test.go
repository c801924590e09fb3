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
	"github.com/agentbull/toolruntime/protocol"
)

// TestStoreMsg checks the acknowledgements storeMsg reads without
// decoding, and the errors it decodes, against a real server.
// It runs once over the connection's own RequestMsg and once over the
// publisher's pubAcks.
func TestStoreMsg(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	conn := s.Connect(t)
	acks, err := newPubAcks(s.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	for i, nc := range []requester{conn, acks} {
		testStoreMsg(t, nc, js, fmt.Sprintf("s%d", i), uint64(2*(i+1)))
	}
}

func testStoreMsg(t *testing.T, nc requester, js jetstream.JetStream, p string, stored uint64) {
	ctx := context.Background()
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
	if err := storeMsg(ctx, nc, msg("s."+p+"a", p+"one", "0"), time.Second); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if err := storeMsg(ctx, nc, msg("s."+p+"a", p+"one", ""), time.Second); err != nil {
		t.Fatalf("duplicate of a stored message: %v", err)
	}
	err := storeMsg(ctx, nc, msg("s."+p+"a", p+"two", "0"), time.Second)
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Fatalf("create of an existing subject: got %v, want API error %d", err, jetstream.JSErrCodeStreamWrongLastSequence)
	}
	if err := storeMsg(ctx, nc, msg("nowhere", "", ""), time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("publish to no stream: got %v, want no responders", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := storeMsg(cancelled, nc, msg("s."+p+"b", "", ""), time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: got %v", err)
	}
	past, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	if err := storeMsg(context.WithoutCancel(past), nc, msg("s."+p+"b", "", ""), time.Second); err != nil {
		t.Fatalf("a context without cancel: %v", err)
	}
	if err := storeMsg(past, nc, msg("s."+p+"b", "", ""), time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past deadline: got %v", err)
	}
	wantStored(t, js, "S", stored)
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
