package turnstate

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// turnState sets the topology up on a server of its own and returns the
// TURN_STATE journal on it (worker "w1").
func turnState(t *testing.T) (*Store, jetstream.JetStream) {
	t.Helper()
	s := natstest.Start(t)
	js := s.JetStream(t)
	ctx := context.Background()
	if err := bus.Setup(ctx, js, bus.Topology{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	return &Store{KV: kv, Pub: &bus.Publisher{JS: js}, Worker: "w1"}, js
}

// TestHeldRecordLeavesRoomForItsVerdict: a held step whose record only
// just fits one message must still take the longest answer it can get
// (every held call refused with a reason of the longest kept length),
// or be refused when it is held; a record that is stored but cannot be
// decided leaves the step pending until its timer, whatever the person
// answered.
func TestHeldRecordLeavesRoomForItsVerdict(t *testing.T) {
	t.Parallel()
	st, _ := turnState(t)
	ctx := context.Background()
	budget := int(st.Pub.MaxPayload()) - protocol.Margin
	for _, under := range []int{1, 200, 1500, 3000} {
		step := int64(under)
		p := &turn.PendingStep{AgentID: "a1", TurnID: "t1", Step: step, State: turn.StatePending,
			Calls: []turn.HeldCall{{Type: protocol.ItemFunctionCall, CallID: "c<1>", Name: "mark", Approval: "named", Valid: json.RawMessage(`{"label":""}`)}}}
		// Pad the arguments until the record is under bytes below the budget.
		data, _ := json.Marshal(p)
		p.Calls[0].Valid = json.RawMessage(`{"label":"` + strings.Repeat("x", budget-under-len(data)) + `"}`)
		if data, _ = json.Marshal(p); len(data) != budget-under {
			t.Fatalf("record of %d bytes, want %d", len(data), budget-under)
		}
		_, err := st.Hold(ctx, p)
		if errors.Is(err, protocol.ErrMalformed) && under < 3000 {
			continue // refused when held: the step is dead-lettered, not stuck
		}
		if err != nil {
			t.Fatal(err)
		}
		got, rev, err := st.PendingStep(ctx, "a1", "t1", step)
		if err != nil || got == nil {
			t.Fatalf("record %v, %v", got, err)
		}
		got.State = turn.StateDecided
		got.Resolution = &turn.Resolution{By: turn.ByAnswer, Seq: 1<<64 - 1, Reason: textclip.Reason(strings.Repeat("<", 4096)),
			Decisions: []protocol.Decision{{CallID: "c<1>", Reason: textclip.Reason(strings.Repeat("&", 4096))}}}
		if _, err := st.UpdatePending(ctx, got, rev); err != nil {
			t.Errorf("a record %d bytes under the budget was held, but its decision cannot be stored: %v", under, err)
		}
	}
}

// TestAnnounceAfterACancelNotesIt: a turn cancelled between the step's
// read of the mark and the store of its record (the fleet's note found
// no record) gets a note of the step's own when the step is announced,
// so that it is finished aborted rather than at its timer. The mark is
// written by another worker: this one's mirror does not know it.
func TestAnnounceAfterACancelNotesIt(t *testing.T) {
	t.Parallel()
	st, js := turnState(t)
	ctx := context.Background()
	other := &Store{KV: st.KV, Pub: st.Pub, Worker: "w2"}
	stream, err := js.Stream(ctx, protocol.StreamApprovals)
	if err != nil {
		t.Fatal(err)
	}
	note := func() *jetstream.RawStreamMsg {
		m, err := stream.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixApprovalCancel, "a1", "t1"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for n, cancelled := range []bool{false, true} {
		p := &turn.PendingStep{AgentID: "a1", TurnID: "t1", Step: int64(n), State: turn.StatePending, ExpiresAt: time.Now().Add(time.Hour).UTC().Truncate(time.Second),
			Calls: []turn.HeldCall{{Type: protocol.ItemFunctionCall, CallID: "c1", Name: "mark", Approval: "named", Valid: json.RawMessage(`{}`)}}}
		if had, err := st.Hold(ctx, p); had != nil || err != nil {
			t.Fatalf("hold: %v, %v", had, err)
		}
		if cancelled {
			if err := other.MarkCancelled(ctx, "a1", "t1", "user <stop>"); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Announce(ctx, p); err != nil {
			t.Fatal(err)
		}
		m := note()
		if !cancelled {
			if m != nil {
				t.Fatalf("a step of a turn not cancelled is noted cancelled: %s", m.Data)
			}
			continue
		}
		if m == nil {
			t.Fatal("no cancel note for a step held after its turn's cancel")
		}
		var c protocol.Cancel
		if err := json.Unmarshal(m.Data, &c); err != nil || c.Reason != "user <stop>" || m.Header.Get(jetstream.MsgIDHeader) != protocol.StepMsgID("a1", "t1", 1)+".cancel" {
			t.Errorf("note %s %v: %v", m.Data, m.Header, err)
		}
	}
}
