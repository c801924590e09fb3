package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/internal/traceheader"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
)

// Publisher publishes the worker's events, and turnstate's writes of call
// keys. JetStream publishes are confirmed by the server (the message is
// stored) and retried with exponential backoff while the failure is
// transient (no leader, a timeout, a reconnect); an event's message id,
// and a claim's own id, make a retry that did land harmless.
type Publisher struct {
	JS     jetstream.JetStream
	Logger *slog.Logger
	// MaxElapsed bounds the retries of one publish (default 30 s).
	MaxElapsed time.Duration
	// AttemptTimeout bounds one attempt (default 5 s): an attempt whose
	// acknowledgement is lost in a leader change or a reconnect is tried
	// again, rather than waited for until ctx ends (a tool's ctx can have
	// minutes left). A cancel of ctx ends the retries, and does not cut
	// short an attempt already waiting.
	AttemptTimeout time.Duration
	// Interest, when set, says whether anyone subscribes to a subject
	// (Embedded.Interest): an activity event without a subscriber is
	// not sent. Core NATS drops such a message at the server, but only
	// after the client has written it and the server has read, parsed
	// and matched it: two of the six messages a step sends.
	Interest func(subject string) bool

	bufs sync.Pool // of *[]byte: getBuf
	msgs sync.Pool // of *outMsg: getMsg
	acks pubAcksOf // the answers of the stored writes
}

// CallOutput publishes a call.output event.
func (p *Publisher) CallOutput(ctx context.Context, ev *protocol.CallOutput) error {
	return p.publishJSON(ctx, protocol.Subject(protocol.PrefixOutput, ev.AgentID, ev.TurnID), ev.MsgID(), ev)
}

// StepDone publishes a step.done event.
func (p *Publisher) StepDone(ctx context.Context, ev *protocol.StepDone) error {
	return p.publishJSON(ctx, protocol.Subject(protocol.PrefixOutput, ev.AgentID, ev.TurnID), ev.MsgID(), ev)
}

// Activity publishes a progress event on core NATS; losing one is
// harmless. A label too large for the connection is clipped
// (wire.AppendActivity). One that nobody subscribes to (Interest) is
// not sent.
func (p *Publisher) Activity(agentID, turnID string, a protocol.Activity) {
	subject := protocol.Subject(protocol.PrefixActive, agentID, turnID)
	if p.Interest != nil && !p.Interest(subject) {
		return
	}
	buf := p.getBuf()
	defer p.putBuf(buf)
	data, err := wire.AppendActivity((*buf)[:0], a, protocol.EventBudget(p.MaxPayload()))
	if *buf = data; err != nil {
		return
	}
	_ = p.JS.Conn().Publish(subject, data)
}

// MaxPayload is the largest message the connection's server takes,
// headers included. It is read from the connection every time: a
// reconnect may reach a server with another limit.
func (p *Publisher) MaxPayload() int64 { return p.JS.Conn().MaxPayload() }

// Event publishes any JSON event to a stream subject with a message id.
func (p *Publisher) Event(ctx context.Context, subject, msgID string, v any) error {
	return p.publishJSON(ctx, subject, msgID, v)
}

// publishJSON publishes v, clipped to fit the connection's max payload
// when it can be clipped (wire.Fit); an event that still does not fit is
// refused with an error wrapping wire.ErrTooLarge, before it is sent.
func (p *Publisher) publishJSON(ctx context.Context, subject, msgID string, v any) error {
	om := p.getMsg(subject, msgID)
	defer p.msgs.Put(om)
	m := &om.m
	ctx, span := publishSpan(ctx, subject)
	traceheader.Inject(ctx, m.Header)
	buf := p.getBuf()
	defer p.putBuf(buf)
	err := p.encode(m, subject, msgID, v, buf)
	if err == nil {
		err = p.publish(ctx, m)
	}
	spans.End(span, err)
	return err
}

// outMsg is an event's message, kept for the next event with its header
// map and the message id's value: nats.NewMsg and Header.Set made both
// for every event, and the client copies a message's header and data as
// it sends them.
type outMsg struct {
	m  nats.Msg
	id [1]string
}

// getMsg is a message to subject with msgID as its Nats-Msg-Id, and no
// other header.
func (p *Publisher) getMsg(subject, msgID string) *outMsg {
	om, _ := p.msgs.Get().(*outMsg)
	if om == nil {
		om = &outMsg{m: nats.Msg{Header: make(nats.Header, 2)}}
	}
	clear(om.m.Header)
	om.m = nats.Msg{Subject: subject, Header: om.m.Header}
	om.id[0] = msgID
	om.m.Header[jetstream.MsgIDHeader] = om.id[:]
	return om
}

// encode sets m's data to v, clipped to fit the connection's max payload
// when v can clip itself. The data is written into buf, which the caller
// takes back once m is published (the client copies what it sends).
func (p *Publisher) encode(m *nats.Msg, subject, msgID string, v any, buf *[]byte) error {
	data, err := wire.Append((*buf)[:0], v)
	if *buf = data; err != nil {
		return err
	}
	budget := int(p.MaxPayload()) - headerLen(m.Header) - protocol.Margin
	if len(data) > budget {
		ok, err := wire.Fit(v, budget)
		if !ok {
			return fmt.Errorf("%w: %s is %d bytes, over the %d byte budget", wire.ErrTooLarge, subject, len(data), budget)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", subject, err)
		}
		if data, err = wire.Marshal(v); err != nil { // rare: a buffer of its own
			return err
		}
		p.logger().Warn("event clipped to fit the server's max payload", "subject", subject, "msg_id", msgID, "bytes", len(data), "budget", budget)
	}
	m.Data = data
	return nil
}

// getBuf is a buffer to write an event into: a step publishes four (two
// activities, call.output, step.done), each copied by the client as it is
// sent, so that one buffer serves the next event.
func (p *Publisher) getBuf() *[]byte {
	if buf, ok := p.bufs.Get().(*[]byte); ok {
		return buf
	}
	return new([]byte)
}

// putBuf returns buf for the next event, unless an event made it large.
func (p *Publisher) putBuf(buf *[]byte) {
	if cap(*buf) <= 16<<10 {
		p.bufs.Put(buf)
	}
}

// headerLen is the length of h as the client writes it.
func headerLen(h nats.Header) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// TooLarge reports whether err is a publish refused for its size: by the
// worker before sending (wire.ErrTooLarge), by the client (max
// payload) or by a stream (max message size). Such a publish fails the
// same way every time.
func TooLarge(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, wire.ErrTooLarge) || errors.Is(err, nats.ErrMaxPayload) ||
		errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMessageTooLarge
}

func (p *Publisher) publish(ctx context.Context, m *nats.Msg) error {
	attempt := p.AttemptTimeout
	if attempt <= 0 {
		attempt = 5 * time.Second
	}
	err := storeMsg(ctx, p.acks.of(p.JS.Conn()), m, attempt)
	if err == nil || !transient(err) {
		return err
	}
	// Only a publish that must be tried again sets up the backoff; the
	// failed attempt above is its first.
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = p.MaxElapsed
	if b.MaxElapsedTime == 0 {
		b.MaxElapsedTime = 30 * time.Second
	}
	first := err
	return backoff.RetryNotify(func() error {
		if first != nil {
			err, first = first, nil
			return err
		}
		err := storeMsg(ctx, p.acks.of(p.JS.Conn()), m, attempt)
		if err != nil && !transient(err) {
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithContext(b, ctx), func(err error, d time.Duration) {
		p.logger().Warn("publish failed; retrying", "subject", m.Subject, "retry_in", d, "err", err)
	})
}

// storeMsg publishes m to a stream and waits for the server to store it,
// as jetstream's PublishMsg does, with one difference that matters under
// load: a success is recognised by its first bytes and not decoded. Every
// step waits for four acknowledgements, and decoding them with
// encoding/json was a sixteenth of the worker's CPU. Errors are decoded
// into the *jetstream.APIError that PublishMsg would return.
//
// The wait is bounded by timeout, or by ctx's deadline when that is
// sooner. A ctx cancelled without a deadline is seen before the message
// is sent, not during the wait: a context per attempt, registered with
// the one every handler shares, added a third to the publish's cost.
func storeMsg(ctx context.Context, nc requester, m *nats.Msg, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok {
		if timeout = min(timeout, time.Until(d)); timeout <= 0 {
			return context.DeadlineExceeded
		}
	}
	r, err := nc.RequestMsg(m, timeout)
	if err != nil {
		return err
	}
	return PubAckError(r.Data)
}

// pubAckOK starts every successful acknowledgement: the server writes the
// stream name first, and an error first of all (JSPubAckResponse).
var pubAckOK = []byte(`{"stream":`)

// PubAckError reads a stream's answer to a publish: nil when the message
// was stored (or was a duplicate of a stored one).
func PubAckError(data []byte) error {
	if bytes.HasPrefix(data, pubAckOK) {
		return nil
	}
	var ack struct {
		Error  *jetstream.APIError `json:"error"`
		Stream string              `json:"stream"`
	}
	if err := json.Unmarshal(data, &ack); err != nil {
		return fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	}
	if ack.Error != nil {
		return ack.Error
	}
	if ack.Stream == "" {
		return jetstream.ErrInvalidJSAck
	}
	return nil
}

// errCodeMessageTooLarge is the server's JSStreamMessageExceedsMaximumErr
// ("message size exceeds maximum allowed").
const errCodeMessageTooLarge jetstream.ErrorCode = 10054

// errCodeDuplicateInProcess is the server's JSStreamDuplicateMessageConflict
// ("duplicate message id is in process").
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

// transient reports whether a publish may succeed if tried again.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503: no leader / JetStream temporarily unavailable. 10158: an
		// earlier attempt of this very publish (same message id) is still
		// being stored; once it is, a retry is answered as a duplicate.
		return apiErr.Code == 503 || apiErr.ErrorCode == errCodeDuplicateInProcess
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected)
}

func (p *Publisher) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}
