package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// natsHeaderPrefix starts the headers the server acts on; a dead letter
// keeps the original's as protocol.HeaderDeadPrefix + name.
const natsHeaderPrefix = "Nats-"

// maxDeadReason bounds the Dead-Reason header.
const maxDeadReason = 2 << 10

// DeadLetters copies messages that cannot be processed to turn.dead.…
type DeadLetters struct {
	JS  jetstream.JetStream
	Pub *Publisher
	// Logger defaults to the publisher's.
	Logger *slog.Logger
	// MaxElapsed bounds the retries of one copy (default 30 s); the
	// caller keeps the message until a copy is stored.
	MaxElapsed time.Duration
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

// copy stores the dead letter, retrying every failure with backoff (a
// dead letter must land: the caller does not let the message go before).
// A message that does not fit whole is copied as its head (Dead-Truncated).
func (d *DeadLetters) copy(ctx context.Context, subject string, h nats.Header, data []byte, stream string, seq uint64, reason string) error {
	out := deadLetter(subject, h, data, stream, seq, reason, d.Pub.MaxPayload())
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 100 * time.Millisecond
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = d.MaxElapsed
	if b.MaxElapsedTime == 0 {
		b.MaxElapsedTime = 30 * time.Second
	}
	return backoff.RetryNotify(func() error {
		err := d.Pub.publish(ctx, out)
		if TooLarge(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, wait time.Duration) {
		d.logger().Warn("storing a dead letter failed; retrying", "subject", subject, "stream", stream, "seq", seq, "retry_in", wait, "err", err)
	})
}

// deadLetter builds the dead letter of a message: its headers and body
// with the dead-letter headers added, cut to fit maxPayload.
func deadLetter(subject string, h nats.Header, data []byte, stream string, seq uint64, reason string, maxPayload int64) *nats.Msg {
	out := nats.NewMsg(deadSubject(subject))
	for k, vs := range h {
		// The server acts on its own headers (Nats-Expected-Stream,
		// Nats-Expected-Last-Sequence, Nats-TTL, Nats-Rollup, …): on the
		// copy's publish they would refuse it every time, or change what
		// it is. They are kept under another name.
		if len(k) >= len(natsHeaderPrefix) && strings.EqualFold(k[:len(natsHeaderPrefix)], natsHeaderPrefix) {
			k = protocol.HeaderDeadPrefix + k
		}
		for _, v := range vs {
			out.Header.Add(k, v)
		}
	}
	set := func(m *nats.Msg) {
		m.Header.Set(protocol.HeaderDeadReason, HeaderValue(reason, maxDeadReason))
		m.Header.Set(protocol.HeaderDeadStreamSeq, strconv.FormatUint(seq, 10))
		m.Header.Set(protocol.HeaderDeadStream, stream)
		m.Header.Set(protocol.HeaderDeadSubject, subject)
		m.Header.Set(jetstream.MsgIDHeader, "dead."+stream+"."+strconv.FormatUint(seq, 10))
	}
	set(out)
	out.Data = data
	limit := int(maxPayload) - protocol.Margin
	if headerLen(out.Header)+len(data) <= limit {
		return out
	}
	// The head that fits, with the truncation headers (which the room is
	// computed with).
	out.Header.Set(protocol.HeaderDeadTruncated, "true")
	out.Header.Set(protocol.HeaderDeadSize, strconv.Itoa(len(data)))
	if headerLen(out.Header) > limit/2 {
		// The original headers are most of it: only the worker's are kept.
		dropped := headerLen(h)
		out.Header = nats.Header{}
		set(out)
		out.Header.Set(protocol.HeaderDeadTruncated, "true")
		out.Header.Set(protocol.HeaderDeadSize, strconv.Itoa(len(data)))
		out.Header.Set(protocol.HeaderDeadHeadersDropped, strconv.Itoa(dropped))
	}
	out.Data = data[:max(0, min(len(data), limit-headerLen(out.Header)))]
	return out
}

// HeaderValue makes s a header value: on one line, at most n bytes
// (n counts the "…" that marks a cut).
func HeaderValue(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
	return textclip.Cut(s, n, "…")
}

func (d *DeadLetters) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return d.Pub.logger()
}

// deadSubject keeps the agent and turn tokens of the original subject
// (the stream's filter guarantees there are two): the third and fourth,
// or, on a pending step's timeout and a turn's cancel note
// (turn.approval.timeout.<agent>.<turn>.<step>,
// turn.approval.cancel.<agent>.<turn>), the fourth and fifth, so that
// the turn's gateway sees those too.
func deadSubject(subject string) string {
	t := subjectTokens(subject)
	switch {
	case len(t) == 4:
		return protocol.Subject(protocol.PrefixDead, t[2], t[3])
	case (len(t) == 6 && strings.HasPrefix(subject, protocol.PrefixApprovalTimeout+".") || len(t) == 5 && strings.HasPrefix(subject, protocol.PrefixApprovalCancel+".")) &&
		protocol.ValidID(t[3]) && protocol.ValidID(t[4]):
		return protocol.Subject(protocol.PrefixDead, t[3], t[4])
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
		reason := fmt.Sprintf("delivery limit reached: delivered %d times to %s without success", a.Deliveries, a.Consumer)
		subject := raw.Subject
		if s := raw.Header.Get(HeaderSubject); s != "" {
			subject = s // a step spilled to TURN_BACKLOG
		}
		if err := d.copy(ctx, subject, raw.Header, raw.Data, stream, a.StreamSeq, reason); err != nil {
			// The step stays in the work queue, where an operator finds it.
			log.Error("max-deliveries advisory: dead-lettering failed; the step stays in its stream", "stream", stream, "seq", a.StreamSeq, "err", err)
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
