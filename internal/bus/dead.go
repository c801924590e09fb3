package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/protocol"
)

// Dead-letter headers.
const (
	HeaderDeadReason    = "Dead-Reason"
	HeaderDeadStreamSeq = "Dead-Stream-Seq"
	HeaderDeadStream    = "Dead-Stream"
	HeaderDeadSubject   = "Dead-Subject"
)

// DeadLetters copies messages that cannot be processed to turn.dead.…
type DeadLetters struct {
	JS  jetstream.JetStream
	Pub *Publisher
}

// Copy publishes msg's data and headers to the dead-letter stream with the
// reason, and returns once it is stored.
func (d *DeadLetters) Copy(ctx context.Context, msg jetstream.Msg, reason string) error {
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	return d.copy(ctx, msg.Subject(), msg.Headers(), msg.Data(), md.Stream, md.Sequence.Stream, reason)
}

func (d *DeadLetters) copy(ctx context.Context, subject string, h nats.Header, data []byte, stream string, seq uint64, reason string) error {
	out := nats.NewMsg(deadSubject(subject))
	for k, vs := range h {
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	out.Header.Set(HeaderDeadReason, reason)
	out.Header.Set(HeaderDeadStreamSeq, strconv.FormatUint(seq, 10))
	out.Header.Set(HeaderDeadStream, stream)
	out.Header.Set(HeaderDeadSubject, subject)
	out.Header.Set(jetstream.MsgIDHeader, "dead."+stream+"."+strconv.FormatUint(seq, 10))
	out.Data = data
	return d.Pub.publish(ctx, out)
}

// deadSubject keeps the agent and turn tokens of the original subject
// (the stream's filter guarantees there are two).
func deadSubject(subject string) string {
	t := subjectTokens(subject)
	if len(t) == 4 {
		return protocol.Subject(protocol.PrefixDead, t[2], t[3])
	}
	return protocol.Subject(protocol.PrefixDead, "_", "_")
}

// advisory is the part of a max-deliveries advisory the worker reads.
type advisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// WatchDeliveryLimit listens (in a queue group, so one worker acts) for
// the server's advisory that a step reached its consumer's delivery
// limit, copies that step to the dead-letter stream and removes it from
// the work queue, where it would otherwise stay forever.
func (d *DeadLetters) WatchDeliveryLimit(nc *nats.Conn, stream, consumer string, meter StepMeter, log *slog.Logger) (*nats.Subscription, error) {
	subj := fmt.Sprintf("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.%s.%s", stream, consumer)
	return nc.QueueSubscribe(subj, "turn-worker-dead", func(m *nats.Msg) {
		var a advisory
		if err := json.Unmarshal(m.Data, &a); err != nil {
			log.Error("unreadable max-deliveries advisory", "err", err)
			return
		}
		ctx := context.Background()
		s, err := d.JS.Stream(ctx, stream)
		if err != nil {
			log.Error("max-deliveries advisory: stream lookup failed", "stream", stream, "err", err)
			return
		}
		raw, err := s.GetMsg(ctx, a.StreamSeq)
		if err != nil {
			// Already removed (another worker, or it finally succeeded).
			return
		}
		reason := fmt.Sprintf("delivery limit reached: delivered %d times to %s without success", a.Deliveries, consumer)
		if err := d.copy(ctx, raw.Subject, raw.Header, raw.Data, stream, a.StreamSeq, reason); err != nil {
			log.Error("max-deliveries advisory: dead-lettering failed", "seq", a.StreamSeq, "err", err)
			return
		}
		if err := s.DeleteMsg(ctx, a.StreamSeq); err != nil {
			log.Error("max-deliveries advisory: removing the step failed", "seq", a.StreamSeq, "err", err)
			return
		}
		if meter != nil {
			meter.DeadLetter(stream, reason)
		}
		log.Warn("step dead-lettered", "subject", raw.Subject, "reason", reason)
	})
}
