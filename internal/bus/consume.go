package bus

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/repull"
	"github.com/agentbull/toolruntime/internal/textclip"
)

// MaxRetryDelay is the longest delay before a failed step is delivered
// again.
const MaxRetryDelay = 30 * time.Second

// ErrShutdown is the cause of a handler's context when the worker stopped
// waiting for it during shutdown.
var ErrShutdown = errors.New("worker shutting down")

// Handler processes one message. Returning nil acknowledges it; a
// *DeadLetter terminates it and copies it to the dead-letter stream; any
// other error has it delivered again after a backoff.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// Starter starts processing one message as a Handler does, without
// holding the calling goroutine until it is over: done is called once,
// on any goroutine, with what the Handler would return. A step whose
// calls run long so keeps no goroutine of its own waiting for them.
type Starter func(ctx context.Context, msg jetstream.Msg, done func(error))

// Settled is told that a message started with Consumer.Start is settled.
// An interface, not a func: what implements it is most often something
// the caller has already, where a func would be an allocation of every
// message.
type Settled interface{ Settled() }

// DeadLetter is the error a handler returns for a message that can never
// be processed.
type DeadLetter struct{ Reason string }

func (d *DeadLetter) Error() string { return "dead letter: " + d.Reason }

// Consumer runs a handler over a durable pull consumer with bounded
// concurrency, lease renewal and a graceful stop.
type Consumer struct {
	JS      jetstream.JetStream
	Stream  string
	Durable string
	Handler Handler
	Dead    *DeadLetters
	Logger  *slog.Logger
	// Concurrency bounds the messages handled at once (default 256).
	Concurrency int
	// Grace is how long a stop waits for running handlers before it
	// abandons them (their steps are delivered again).
	Grace time.Duration
	// Meter, when set, counts steps by result.
	Meter StepMeter
	// RetryDelay is the first delay before a failed step is delivered
	// again (1 s), doubled per attempt up to MaxRetryDelay
	// (Topology.RetryDelay).
	RetryDelay time.Duration

	leases leases
	// heartbeat is the pull's idle heartbeat (5 s); pullCheck is how
	// often Run looks for a stranded pull (250 ms). Tests set them.
	heartbeat, pullCheck time.Duration
}

// StepMeter counts what became of steps (the worker implements it with
// OpenTelemetry). Results: done, dead_letter, retry, abandoned.
type StepMeter interface {
	Step(stream, result string, attempt uint64)
	DeadLetter(stream, reason string)
}

// Run consumes until ctx ends, then stops pulling, hands back what was
// prefetched, lets running handlers finish within Grace, and returns.
func (c *Consumer) Run(ctx context.Context) error {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	cons, err := c.JS.Consumer(ctx, c.Stream, c.Durable)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped before it started
		}
		return fmt.Errorf("consumer %s > %s: %w", c.Stream, c.Durable, err)
	}
	ackWait := cons.CachedInfo().Config.AckWait
	maxDeliver := cons.CachedInfo().Config.MaxDeliver
	n := c.Concurrency
	if n <= 0 {
		n = 256
	}
	// Handlers run under their own context: a stop lets them finish, and
	// cancels it (ErrShutdown) only when the grace period is over.
	work, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	// n long-lived handlers take the messages: a step's goroutine keeps
	// the stack that decoding and publishing grew, where a goroutine per
	// step grew a fresh one every time.
	msgs := make(chan jetstream.Msg)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for msg := range msgs {
				c.handle(work, log, msg, ackWait, maxDeliver)
			}
		})
	}
	// A pull that nats.go strands (package repull) is replaced by a new
	// one; a stop drains it, and what it had prefetched is handed back.
	keep := &repull.Keeper{Consumer: cons, Name: c.Stream + " > " + c.Durable, Logger: log, Every: c.pullCheck}
	heartbeat := cmp.Or(c.heartbeat, 5*time.Second)
	err = keep.Run(ctx, func() (repull.Pull, error) {
		// A small prefetch: messages buffered here wait without a lease.
		it, err := cons.Messages(jetstream.PullMaxMessages(max(1, n/2)), jetstream.PullHeartbeat(heartbeat), jetstream.PullExpiry(max(30*time.Second, 3*heartbeat)))
		if err != nil {
			return nil, fmt.Errorf("pulling from %s > %s: %w", c.Stream, c.Durable, err)
		}
		return keep.Messages(it, func(msg jetstream.Msg) {
			// Prefetched after the stop, or waiting for a handler when
			// it came: hand it back at once. Waiting for a handler to be
			// free would hold the drain, and with it the grace period,
			// until a running step ends by itself.
			select {
			case <-ctx.Done():
				_ = msg.Nak()
				return
			default:
			}
			select {
			case msgs <- msg:
			case <-ctx.Done():
				_ = msg.Nak()
			}
		}), nil
	})
	close(msgs)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.Grace):
		log.Warn("grace period over; abandoning running steps, they will be delivered again", "stream", c.Stream)
		abandon(ErrShutdown)
		<-done
	}
	return err
}

// Handle runs the handler over one message and settles it as Run does
// (acknowledged, dead-lettered, or delivered again after a backoff),
// renewing its lease while the handler runs. It is Run's work for one
// message, for an intake that pulls the messages itself (package
// fairshare); ackWait and maxDeliver are the consumer's.
func (c *Consumer) Handle(ctx context.Context, msg jetstream.Msg, ackWait time.Duration, maxDeliver int) {
	log := c.Logger
	if log == nil {
		log = slog.Default()
	}
	c.handle(ctx, log, msg, ackWait, maxDeliver)
}

// Start is Handle for a Starter: start starts the message's handling,
// and the message is settled, then after told, once start's done is
// called, on the goroutine that calls it. Start returns once start did.
func (c *Consumer) Start(ctx context.Context, msg jetstream.Msg, ackWait time.Duration, maxDeliver int, start Starter, after Settled) {
	s := c.settleOf(msg)
	msg = nil
	c.leases.add(s, ackWait)
	start(ctx, s.handed(), func(err error) {
		log := c.Logger
		if log == nil {
			log = slog.Default()
		}
		c.settle(ctx, log, s, maxDeliver, err)
		c.leases.remove(s)
		after.Settled()
	})
}

func (c *Consumer) handle(ctx context.Context, log *slog.Logger, msg jetstream.Msg, ackWait time.Duration, maxDeliver int) {
	// What settling the step needs is taken before the handler runs, and
	// the message is not kept while it runs (a long call's step would
	// hold its body and decoded headers, about a kilobyte, for nothing):
	// the reply subject, the stream's sequence for a dead letter's copy.
	s := c.settleOf(msg)
	msg = nil
	// The lease is kept while a dead letter is stored too: its copy is
	// retried, and the step must not go to another worker meanwhile.
	c.leases.add(s, ackWait)
	defer c.leases.remove(s)
	c.settle(ctx, log, s, maxDeliver, c.Handler(ctx, s.handed()))
}

// settle settles a handled step as its handler's err says: acknowledged,
// dead-lettered, or delivered again after a backoff.
func (c *Consumer) settle(ctx context.Context, log *slog.Logger, s *settle, maxDeliver int, err error) {
	var dl *DeadLetter
	if err != nil {
		dl = deadLetterIn(err)
	}
	if c.Meter != nil {
		result := "retry"
		switch {
		case err == nil:
			result = "done"
		case dl != nil:
			result = "dead_letter"
			c.Meter.DeadLetter(c.Stream, dl.Reason)
		case context.Cause(ctx) == ErrShutdown:
			result = "abandoned"
		}
		c.Meter.Step(c.Stream, result, s.attempt)
	}
	switch {
	case err == nil:
		// Not waited for: the events are stored, and a lost ack only means
		// a redelivery, which the journal answers without running anything.
		if err := s.reply(ackAck); err != nil {
			log.Warn("ack failed; the step will be delivered again and answered from the journal", "subject", s.subject, "err", err)
		}
	case dl != nil:
		if err := c.deadCopy(context.WithoutCancel(ctx), s, dl.Reason); err != nil {
			// Not terminated: the step is delivered again and dead-lettered
			// then, or by the delivery-limit advisory.
			log.Error("dead-lettering failed; the step will be delivered again", "subject", s.subject, "reason", textclip.Head(dl.Reason, 2<<10), "err", err)
			_ = s.reply(nakDelay(time.Second))
			return
		}
		_ = s.reply(append(append([]byte(nil), ackTerm...), " "+textclip.Head(dl.Reason, 200)...))
		log.Warn("step dead-lettered", "subject", s.subject, "reason", textclip.Head(dl.Reason, 2<<10))
	default:
		delay := retryDelay(c.RetryDelay, s.attempt)
		log.Warn("step failed; delivering it again", "subject", s.subject, "attempt", s.attempt, "max_deliver", maxDeliver, "retry_in", delay, "err", err)
		_ = s.reply(nakDelay(delay))
	}
}

// The bodies of a JetStream acknowledgement (what jetstream.Msg's Ack,
// InProgress, NakWithDelay and TermWithReason publish).
var (
	ackAck      = []byte("+ACK")
	ackProgress = []byte("+WPI")
	ackTerm     = []byte("+TERM")
)

func nakDelay(d time.Duration) []byte {
	return fmt.Appendf(nil, "-NAK {\"delay\": %d}", d.Nanoseconds())
}

// settle is what settling a delivered step needs once its handler has
// run: where to send the acknowledgement, and where the step is stored
// (a dead letter's copy reads it back from there). It holds the message
// itself only while the handler has it, or when the consumer has no
// connection of its own to answer on (then the message answers).
type settle struct {
	nc      *nats.Conn
	msg     jetstream.Msg // until handed, or for good when nc is nil
	to      string        // the reply subject
	subject string
	stream  string
	seq     uint64
	attempt uint64
	// The consumer's leases: while handled, s is in their list. renewed
	// is on the leases' clock (leases.clock): 8 bytes where a time.Time
	// is 24, which takes a settle, kept by every step in flight, from 128
	// bytes to 112.
	prev, next *settle
	renewed    time.Duration
}

func (c *Consumer) settleOf(msg jetstream.Msg) *settle {
	s := &settle{msg: msg, to: msg.Reply(), subject: msg.Subject(), attempt: 1}
	if md, _ := msg.Metadata(); md != nil {
		s.stream, s.seq, s.attempt = md.Stream, md.Sequence.Stream, md.NumDelivered
	}
	if c.JS != nil && s.to != "" && s.stream != "" {
		s.nc = c.JS.Conn()
	}
	return s
}

// handed gives the message to the handler, and forgets it when the
// settle does not need it.
func (s *settle) handed() jetstream.Msg {
	m := s.msg
	if s.nc != nil {
		s.msg = nil
	}
	return m
}

// reply publishes an acknowledgement body, not waiting for an answer.
func (s *settle) reply(body []byte) error {
	if s.nc != nil {
		return s.nc.Publish(s.to, body)
	}
	switch {
	case bytes.Equal(body, ackAck):
		return s.msg.Ack()
	case bytes.Equal(body, ackProgress):
		return s.msg.InProgress()
	case bytes.HasPrefix(body, ackTerm):
		return s.msg.TermWithReason(strings.TrimPrefix(string(body[len(ackTerm):]), " "))
	default:
		var delay struct {
			Delay time.Duration `json:"delay"`
		}
		_ = json.Unmarshal(bytes.TrimPrefix(body, []byte("-NAK ")), &delay)
		return s.msg.NakWithDelay(delay.Delay)
	}
}

// deadCopy stores the dead letter of the step s settles: from the
// message when it is still held, else read back from its stream (a step
// stays stored until it is settled; one spilled to TURN_BACKLOG carries
// its subject in HeaderSubject).
func (c *Consumer) deadCopy(ctx context.Context, s *settle, reason string) error {
	if s.msg != nil {
		return c.Dead.Copy(ctx, s.msg, reason)
	}
	st, err := c.JS.Stream(ctx, s.stream)
	if err != nil {
		return err
	}
	raw, err := st.GetMsg(ctx, s.seq)
	if err != nil {
		return err
	}
	subject := raw.Subject
	if h := raw.Header.Get(HeaderSubject); h != "" {
		subject = h
	}
	return c.Dead.copy(ctx, subject, raw.Header, raw.Data, s.stream, s.seq, reason)
}

// deadLetterIn is the *DeadLetter in err's chain, or nil. The target of
// errors.As lives on the heap: here, only a step that failed pays for it.
func deadLetterIn(err error) *DeadLetter {
	var dl *DeadLetter
	if errors.As(err, &dl) {
		return dl
	}
	return nil
}

// leases tells the server that the steps being handled are in progress,
// each about every third of the ack wait, so that a long call does not get
// its step delivered again. One goroutine does it for all of a consumer's
// steps, and only while there are some: a timer per step was an
// allocation of every step, and kept by every step in flight.
type leases struct {
	mu      sync.Mutex
	head    *settle
	every   time.Duration // the check's period: a sixth of the ack wait
	running bool
	epoch   time.Time // where the clock starts, set by the first add
}

// clock is the monotonic time since the first add. The caller holds mu.
func (l *leases) clock() time.Duration {
	if l.epoch.IsZero() {
		l.epoch = time.Now()
	}
	return time.Since(l.epoch)
}

func (l *leases) add(s *settle, ackWait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s.renewed = l.clock()
	s.prev, s.next = nil, l.head
	if l.head != nil {
		l.head.prev = s
	}
	l.head = s
	if !l.running {
		l.every = ackWait / 6
		if l.every <= 0 {
			l.every = 10 * time.Second / 3
		}
		l.running = true
		go l.renew()
	}
}

// remove ends s's renewals: none is sent once it returns.
func (l *leases) remove(s *settle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next = nil, nil
}

// renew runs while steps are handled. A step's lease is renewed when it
// is two periods old: between a third and half of the ack wait after the
// last. The renewals are published (not waited for) under the lock, so
// that none follows the step's settling.
func (l *leases) renew() {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for range t.C {
		l.mu.Lock()
		if l.head == nil {
			l.running = false
			l.mu.Unlock()
			return
		}
		now := l.clock()
		for s := l.head; s != nil; s = s.next {
			if now-s.renewed >= 2*l.every-l.every/10 {
				s.renewed = now
				_ = s.reply(ackProgress)
			}
		}
		l.mu.Unlock()
	}
}

// retryDelay doubles from first (one second when 0) per attempt, up to
// MaxRetryDelay.
func retryDelay(first time.Duration, attempt uint64) time.Duration {
	d := first
	if d <= 0 {
		d = time.Second
	}
	for i := uint64(1); i < attempt && d < MaxRetryDelay; i++ {
		d *= 2
	}
	return min(d, MaxRetryDelay)
}

// subjectTokens splits a subject, for handlers that read ids from it.
func subjectTokens(subject string) []string { return strings.Split(subject, ".") }
