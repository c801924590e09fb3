package fairshare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/repull"
	"github.com/agentbull/toolruntime/protocol"
)

// Fair share (protocol 1.2). A work stream (TURN_CALLS, TURN_TASKS) is read
// by an intake that never waits: it reads a step's fairness key and queues
// the step under its key here, unacknowledged (its lease renewed while it
// waits), within a budget of steps and bytes (HoldSteps, HoldBytes; one key
// at most 7/8 of it). A step past the budget, or of a key that already has
// steps in the backlog, is moved to the key's subject of TURN_BACKLOG
// (turn.backlog.<kind>.<key token>), published with a message id derived
// from its stream sequence and only then acknowledged, so that a crash
// between the two is deduplicated. Every worker serves the backlog from one
// durable consumer per key (their filters do not overlap, as a work queue
// requires) into the same per-key queues. Whenever a slot frees, the next
// key is picked by weighted round-robin (stride scheduling) over the keys
// with work waiting, here or in the backlog, so that they share the worker
// in proportion to their weights.
//
// Across a fleet the share holds because no worker's choice depends on
// what it happened to fetch: a key with steps in the backlog is a
// candidate on every worker even when none of its steps is here yet. The
// slot it wins is claimed for it (its pass charged at once) and filled by
// its next fetched step, which the feeder waits on the server for; a fetch
// that finds the backlog empty releases the claims. So a key whose backlog
// drains faster than spills fill it (a loaded cluster) keeps its share
// instead of losing its slots to the keys whose steps are held here, which
// gave two keys of weights 1 and 3 down to half each.
const (
	// HeaderWeight is a spilled step's fairness weight.
	HeaderWeight = "Turn-Fair-Weight"
	// HeaderDelivered is how often a spilled step had been delivered
	// from its work stream: its deliveries from the backlog count on from
	// there against MaxDeliver.
	HeaderDelivered = "Turn-Delivered"
	// KindCall and KindTask are the backlog subjects' kind tokens.
	KindCall = "call"
	KindTask = "task"
)

// BacklogToken is a fairness key as one subject token: '.' (the only
// character of a key that subjects give a meaning) becomes '~', which no
// key holds, so that the mapping is one to one.
func BacklogToken(key string) string { return strings.ReplaceAll(key, ".", "~") }

// BacklogKey is the inverse of BacklogToken.
func BacklogKey(token string) string { return strings.ReplaceAll(token, "~", ".") }

// BacklogSubject is the subject of key's spilled steps of kind.
func BacklogSubject(kind, key string) string {
	return bus.PrefixBacklog + "." + kind + "." + BacklogToken(key)
}

// BacklogDurable is the name of key's backlog consumer: a digest, since
// consumer names may not hold every character a key may.
func BacklogDurable(kind, key string) string {
	sum := sha256.Sum256([]byte(key))
	return "backlog-" + kind + "-" + hex.EncodeToString(sum[:12])
}

// KeyOf reads a step's fairness key and weight from its subject
// (prefix.<agent>.<turn>) and payload, cheaply: the payload is decoded
// only when it names a fairness. A malformed fairness counts as the
// agent's own share; the handler dead-letters the step.
func KeyOf(subject string, data []byte) (string, float64) {
	agent := "_"
	if a, ok := agentToken(subject); ok && protocol.ValidFairKey(a) {
		agent = a
	}
	if !bytes.Contains(data, []byte(`"fairness"`)) {
		return agent, 1
	}
	var s struct {
		Context struct {
			Fairness json.RawMessage `json:"fairness"`
		} `json:"context"`
	}
	var f protocol.Fairness
	if json.Unmarshal(data, &s) != nil || len(s.Context.Fairness) == 0 || f.UnmarshalJSON(s.Context.Fairness) != nil {
		return agent, 1
	}
	return f.KeyFor(agent), f.EffectiveWeight()
}

// agentToken is the third of a subject's four tokens, read without
// splitting the subject (the intake reads it for every step).
func agentToken(subject string) (string, bool) {
	i := strings.IndexByte(subject, '.')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(subject[i+1:], '.')
	if j < 0 {
		return "", false
	}
	rest := subject[i+1+j+1:]
	a, turn, ok := strings.Cut(rest, ".")
	if !ok || strings.IndexByte(turn, '.') >= 0 {
		return "", false
	}
	return a, true
}

// Intake runs a handler over a work stream with a fair share per key:
// see the comment above HeaderWeight.
type Intake struct {
	JS jetstream.JetStream
	// Stream and Durable are the work stream and its intake consumer.
	Stream, Durable string
	// Kind is the backlog subjects' kind token (KindCall, KindTask).
	Kind     string
	Topology bus.Topology
	Handler  bus.Handler
	// Start, when set, is used in place of Handler: a step's handling
	// holds none of the intake's goroutines while it runs (the one that
	// started it takes the next step), and its slot is freed as its done
	// is called.
	Start  bus.Starter
	Dead   *bus.DeadLetters
	Logger *slog.Logger
	// Concurrency bounds the steps handled at once (256).
	Concurrency int
	// KeySteps bounds one key's steps handled at once (default 7/8 of
	// Concurrency): the rest is kept for keys that arrive later.
	KeySteps int
	// HoldSteps and HoldBytes bound the steps the intake keeps queued
	// here, unacknowledged, before it spills to the backlog (default 128
	// × Concurrency and 64 MiB; one key may hold 7/8 of each). The work
	// consumer's MaxAckPending must leave room for them.
	HoldSteps, HoldBytes int
	Grace                time.Duration
	Meter                bus.StepMeter
	// Discover is how often the backlog's keys are listed, to find keys
	// other workers spilled (250 ms).
	Discover time.Duration
	// Pull is how many steps the intake asks the server for at once
	// (DefaultPull): its pull requests carry the burst, so fewer and
	// larger ones cost less per step.
	Pull int
	// Stage, when set, is told when a step of the work stream reaches each
	// stage here: StageTaken (delivered to the intake), StageStarted (given
	// a slot) and StageHandled (its handler returned: its events are
	// published). For timelines of slow steps (loadgen's burst mode); nil
	// costs nothing.
	Stage func(stage, subject string)

	mu    sync.Mutex
	cond  *sync.Cond
	keys  map[string]*fairKey
	free  int
	vtime float64
	stop  bool
	work  chan fairItem
	inner bus.Consumer
	// The worker goroutines, started as steps need them (take1) rather
	// than Concurrency at once: a goroutine's record stays in the heap
	// for good, and idle ones were a tenth of a worker's heap with every
	// slot but a few in use. idle counts those waiting on work, reserved
	// under mu before a step is handed to one.
	workers    sync.WaitGroup
	handling   sync.WaitGroup // the steps started (Start) not yet done
	servers    int            // the worker goroutines started
	idle       int
	workCtx    context.Context
	ackWait    time.Duration
	maxDeliver int
	// held and heldBytes count the intake's steps queued here.
	held, heldBytes int
	// heartbeat is the pull's idle heartbeat (5 s); pullCheck is how
	// often the intake looks for a stranded pull (250 ms). Tests set them.
	heartbeat, pullCheck time.Duration
}

// queued is a step waiting here for a slot.
type queued struct {
	msg jetstream.Msg
	// size is its bytes, counted against the hold budget when held is
	// set (taken by the intake, not fetched from the backlog).
	size    int
	held    bool
	renewed time.Time
}

type fairKey struct {
	f      *Intake
	key    string
	weight float64
	queue  []queued
	// held and heldBytes count the key's steps queued by the intake.
	held, heldBytes int
	// inflight counts the key's steps running on this worker.
	inflight int
	pass     float64
	// backlogged: the key may have steps in the backlog; new steps of it
	// are spilled behind them, in order.
	backlogged bool
	feeding    bool
	// spills counts spills begun, pending those not yet stored.
	spills, pending uint64
	// claims are slots won by the key (counted in inflight) that its next
	// fetched steps fill; dry is set when its last fetch found nothing, so
	// that it wins no slot until a fetch, a spill or discovery finds some.
	claims int
	dry    bool
	cons   jetstream.Consumer
}

type fairItem struct {
	k   *fairKey
	msg jetstream.Msg
}

// backlogMsg is a spilled step, seen with the subject it was published on
// and the deliveries it had before it was spilled.
type backlogMsg struct {
	jetstream.Msg
	subject string
	before  uint64
}

func (m backlogMsg) Subject() string { return m.subject }

// Metadata counts the deliveries before the spill in NumDelivered.
func (m backlogMsg) Metadata() (*jetstream.MsgMetadata, error) {
	md, err := m.Msg.Metadata()
	if err != nil {
		return nil, err
	}
	c := *md
	c.NumDelivered += m.before
	return &c, nil
}

// The stages Intake.Stage is told of.
const (
	StageTaken   = "taken"
	StageStarted = "started"
	StageHandled = "handled"
)

// maxStartServers bounds the worker goroutines of an intake with a Start:
// each only starts its step, which then holds none of them, so a few
// serve any number of steps in flight. Unbounded, a burst of thousands
// of steps taken at once left hundreds idle for good, each record half a
// KiB of heap.
const maxStartServers = 64

// DefaultPull is Intake.Pull's default.
const DefaultPull = 512

// claimWait is how long a claimed slot waits for its key's next step.
const claimWait = 100 * time.Millisecond

// maxClaims bounds a key's claimed slots: its slot bound, so that a key
// whose backlog fills more slowly than its share drains it (spills landing
// on a loaded cluster) keeps its share rather than handing it to the keys
// whose steps happen to be here. The cost: a key whose backlog is all
// running on other workers (its subject count is not zero) may, after a
// discovery, hold up to its share of the slots idle for claimWait.
func (f *Intake) maxClaims() int { return f.KeySteps }

// ahead is how many of a key's backlog steps are fetched here beyond its
// claims (128): enough that a key's supply covers its share while a fetch
// is on its way on a loaded cluster (a read-ahead of its slot bound, or of
// 16, held each key to one batch per fetch round trip there: 0.6 to 0.69
// for a key of weight 3 against 1).
func (f *Intake) ahead() int { return 128 }

// KeyStat is one key's share on this worker, for operators.
type KeyStat struct {
	Key      string  `json:"key"`
	Weight   float64 `json:"weight"`
	InFlight int     `json:"in_flight"`
	Queued   int     `json:"queued"`
}

// Stats are the keys with steps running or fetched here, busiest first,
// at most n.
func (f *Intake) Stats(n int) []KeyStat {
	f.mu.Lock()
	out := make([]KeyStat, 0, len(f.keys))
	for _, k := range f.keys {
		if k.inflight > 0 || len(k.queue) > 0 {
			out = append(out, KeyStat{Key: k.key, Weight: k.weight, InFlight: k.inflight, Queued: len(k.queue)})
		}
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].InFlight+out[i].Queued != out[j].InFlight+out[j].Queued {
			return out[i].InFlight+out[i].Queued > out[j].InFlight+out[j].Queued
		}
		return out[i].Key < out[j].Key
	})
	return out[:min(n, len(out))]
}

func (f *Intake) log() *slog.Logger {
	if f.Logger != nil {
		return f.Logger
	}
	return slog.Default()
}

// Run serves until ctx ends, then stops pulling, hands back what was
// fetched, lets running handlers finish within Grace, and returns.
func (f *Intake) Run(ctx context.Context) error {
	log := f.log()
	f.Topology = f.Topology.WithDefaults()
	n := f.Concurrency
	if n <= 0 {
		n = 256
	}
	if f.KeySteps <= 0 {
		f.KeySteps = max(1, n*7/8)
	}
	if f.Discover <= 0 {
		f.Discover = 250 * time.Millisecond
	}
	if f.HoldSteps <= 0 {
		f.HoldSteps = 128 * n
	}
	if f.Pull <= 0 {
		f.Pull = DefaultPull
	}
	if f.HoldBytes <= 0 {
		f.HoldBytes = 64 << 20
	}
	if f.heartbeat <= 0 {
		f.heartbeat = 5 * time.Second
	}
	if f.pullCheck <= 0 {
		f.pullCheck = 250 * time.Millisecond
	}
	cons, err := f.JS.Consumer(ctx, f.Stream, f.Durable)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("consumer %s > %s: %w", f.Stream, f.Durable, err)
	}
	backlog, err := f.JS.Stream(ctx, bus.StreamBacklog)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("stream %s: %w", bus.StreamBacklog, err)
	}
	ackWait, maxDeliver := f.Topology.AckWait, f.Topology.MaxDeliver
	f.inner = bus.Consumer{JS: f.JS, Stream: f.Stream, Handler: f.handler(maxDeliver), Dead: f.Dead, Logger: f.Logger, Meter: f.Meter, RetryDelay: f.Topology.RetryDelay}
	// Stats (the operators' metrics and micro stats) may already read the
	// keys: set them under the lock.
	f.mu.Lock()
	f.cond = sync.NewCond(&f.mu)
	f.keys = map[string]*fairKey{}
	f.free = n
	f.work = make(chan fairItem)
	f.mu.Unlock()
	work, abandon := context.WithCancelCause(context.WithoutCancel(ctx))
	defer abandon(nil)
	f.workCtx, f.ackWait, f.maxDeliver = work, ackWait, maxDeliver
	var bg sync.WaitGroup // dispatcher, feeders, discovery, spill confirmations
	bg.Go(func() { f.dispatch() })
	bg.Go(func() { f.discover(ctx, backlog, &bg) })
	bg.Go(func() { f.renew(ctx, ackWait) })
	stopped := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.stop = true
		f.cond.Broadcast()
		f.mu.Unlock()
	})
	defer stopped()
	err = f.intake(ctx, cons, &bg)
	f.mu.Lock()
	f.stop = true
	f.cond.Broadcast()
	f.mu.Unlock()
	bg.Wait()
	// Fetched but not started: handed back at once.
	f.mu.Lock()
	for _, k := range f.keys {
		for _, q := range k.queue {
			_ = q.msg.Nak()
		}
		k.queue, k.held, k.heldBytes = nil, 0, 0
	}
	f.held, f.heldBytes = 0, 0
	f.mu.Unlock()
	close(f.work)
	done := make(chan struct{})
	go func() { f.workers.Wait(); f.handling.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(f.Grace):
		log.Warn("grace period over; abandoning running steps, they will be delivered again", "stream", f.Stream)
		abandon(bus.ErrShutdown)
		<-done
	}
	return err
}

// intake pulls the work stream at full speed: each step runs at once or
// is spilled; it never waits for a slot. Its cost per step is what a quiet
// key's step waits behind a burst stored before it (every step ahead must
// be taken in first), so it does only what cannot wait for the step's
// turn: read the key, queue it, and wake the dispatcher only when that
// step can start at once.
//
// A pull that nats.go strands (package repull) is replaced by a new one:
// bench/inflight came short of its 8,192 calls in flight in one run of two
// to three on two busy cores, waiting for two missed heartbeats (2 × 5 s)
// with steps stored.
func (f *Intake) intake(ctx context.Context, cons jetstream.Consumer, bg *sync.WaitGroup) error {
	log := f.log()
	keep := &repull.Keeper{Consumer: cons, Name: f.Stream + " > " + f.Durable, Logger: log, Every: f.pullCheck}
	return keep.Run(ctx, func() (repull.Pull, error) {
		// Consume rather than Messages: the iterator's Next arms and stops
		// a heartbeat timer per step, the callback only resets one. What
		// was delivered but not yet taken when a pull is drained comes to
		// take, which hands it back (on a stop) or queues it (on a new
		// pull).
		cc, err := cons.Consume(func(msg jetstream.Msg) {
			keep.Taking()
			f.take(ctx, msg, bg)
			keep.Took()
		},
			jetstream.PullMaxMessages(f.Pull), jetstream.PullHeartbeat(f.heartbeat), jetstream.PullExpiry(max(30*time.Second, 3*f.heartbeat)),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if ctx.Err() == nil {
					log.Warn("pulling steps", "stream", f.Stream, "err", err)
				}
			}))
		if err != nil {
			return nil, fmt.Errorf("pulling from %s > %s: %w", f.Stream, f.Durable, err)
		}
		return cc, nil
	})
}

// take queues one step from the work stream under its key, or spills it.
func (f *Intake) take(ctx context.Context, msg jetstream.Msg, bg *sync.WaitGroup) {
	if ctx.Err() != nil {
		_ = msg.Nak()
		return
	}
	subject, data := msg.Subject(), msg.Data()
	if f.Stage != nil {
		f.Stage(StageTaken, subject)
	}
	key, weight := KeyOf(subject, data)
	size := len(data) + len(subject)
	now := time.Now()
	f.mu.Lock()
	k := f.key(key)
	k.weight = weight
	if !k.backlogged && f.held < f.HoldSteps && f.heldBytes+size <= f.HoldBytes &&
		k.held < max(1, f.HoldSteps*7/8) && k.heldBytes+size <= max(size, f.HoldBytes*7/8) {
		// Held here: the dispatcher starts it when its key's turn comes.
		k.queue = append(k.queue, queued{msg: msg, size: size, held: true, renewed: now})
		k.held++
		k.heldBytes += size
		f.held++
		f.heldBytes += size
		// Woken only if it can start now: behind a burst that holds its
		// key's slots, every step woke the dispatcher for nothing. A slot
		// freeing or a key's step ending wakes it for the rest.
		if f.free > 0 && k.inflight < f.KeySteps {
			f.cond.Broadcast()
		}
		f.mu.Unlock()
		return
	}
	k.backlogged = true
	k.spills++
	k.pending++
	f.mu.Unlock()
	f.spill(ctx, k, weight, msg, bg)
}

// key returns key's state, made on first use. f.mu is held.
func (f *Intake) key(key string) *fairKey {
	k := f.keys[key]
	if k == nil {
		k = &fairKey{f: f, key: key, weight: 1, pass: f.vtime}
		f.keys[key] = k
	}
	return k
}

// spill publishes msg to the backlog and acknowledges it once stored.
func (f *Intake) spill(ctx context.Context, k *fairKey, weight float64, msg jetstream.Msg, bg *sync.WaitGroup) {
	md, err := msg.Metadata()
	if err != nil {
		f.spilled(k, false)
		_ = msg.Nak()
		return
	}
	m := nats.NewMsg(BacklogSubject(f.Kind, k.key))
	for h, v := range msg.Headers() {
		m.Header[h] = v
	}
	m.Header.Set(bus.HeaderSubject, msg.Subject())
	m.Header.Set(HeaderWeight, strconv.FormatFloat(weight, 'g', -1, 64))
	m.Header.Set(HeaderDelivered, strconv.FormatUint(md.NumDelivered, 10))
	// Derived from the step's place in its stream: a spill repeated after
	// a crash before the ack is the same message to the backlog.
	m.Header.Set(jetstream.MsgIDHeader, "spill:"+f.Stream+":"+strconv.FormatUint(md.Sequence.Stream, 10))
	m.Data = msg.Data()
	fut, err := f.JS.PublishMsgAsync(m)
	if err != nil {
		f.spillFailed(k, msg, err)
		return
	}
	bg.Go(func() {
		select {
		case <-fut.Ok():
			// Not waited for: a lost ack only spills the step again, which
			// the backlog deduplicates.
			_ = msg.Ack()
			f.spilled(k, true)
		case err := <-fut.Err():
			f.spillFailed(k, msg, err)
		case <-ctx.Done():
			// Unknown whether it was stored: delivered again and deduplicated.
			f.spilled(k, false)
		}
	})
}

func (f *Intake) spillFailed(k *fairKey, msg jetstream.Msg, err error) {
	f.spilled(k, false)
	f.log().Warn("spilling a step to the backlog failed; it will be delivered again", "subject", msg.Subject(), "err", err)
	_ = msg.NakWithDelay(time.Second)
}

// spilled records a spill's end and, once stored, has the key fed.
func (f *Intake) spilled(k *fairKey, stored bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k.pending--
	if stored {
		k.dry = false
		f.feed(k)
	}
}

// release gives key's claimed slots back. f.mu is held.
func (f *Intake) release(k *fairKey) {
	k.dry = true
	if k.claims == 0 {
		return
	}
	k.inflight -= k.claims
	f.free += k.claims
	k.claims = 0
	f.cond.Broadcast()
}

// feed starts key's feeder unless it runs. f.mu is held.
func (f *Intake) feed(k *fairKey) {
	if k.feeding || f.stop {
		return
	}
	k.feeding = true
	k.backlogged = true
	go f.feeder(k)
}

// feeder fetches key's backlog into its queue until the backlog is empty
// and no spill of it is under way.
func (f *Intake) feeder(k *fairKey) {
	log := f.log()
	ctx := context.Background()
	quiet := 0
	for {
		f.mu.Lock()
		// Refilled once half the read-ahead is taken, or for a claim.
		for !f.stop && len(k.queue) >= k.claims+(f.ahead()+1)/2 {
			f.cond.Wait()
		}
		if f.stop {
			k.feeding = false
			f.mu.Unlock()
			return
		}
		room, gen, wait := k.claims+f.ahead()-len(k.queue), k.spills, k.claims > 0
		f.mu.Unlock()
		got, err := f.fetch(ctx, k, room, wait)
		if err != nil {
			log.Warn("fetching a key's backlog", "key", k.key, "err", err)
			f.mu.Lock()
			f.release(k)
			f.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if got > 0 {
			quiet = 0
			continue
		}
		f.mu.Lock()
		// Nothing to fill the key's claims with (other workers took its
		// backlog, or it is served): they go back to the other keys.
		if k.spills == gen && k.pending == 0 {
			f.release(k)
		}
		if k.spills == gen && k.pending == 0 && quiet >= 2 {
			k.backlogged, k.feeding = false, false
			f.mu.Unlock()
			return
		}
		f.mu.Unlock()
		quiet++
		time.Sleep(20 * time.Millisecond)
	}
}

// fetch takes up to n of key's backlog into its queue.
// With wait (the key has claims to fill) the request waits on the server
// for the key's next step, up to claimWait:
// an empty backlog may be one that spills fill more slowly than the key's
// share drains it, and a claim given back at once would hand the key's
// share to the keys whose steps are held here.
func (f *Intake) fetch(ctx context.Context, k *fairKey, n int, wait bool) (int, error) {
	if k.cons == nil {
		t := f.Topology
		c, err := f.JS.CreateOrUpdateConsumer(ctx, bus.StreamBacklog, jetstream.ConsumerConfig{
			Durable: BacklogDurable(f.Kind, k.key), FilterSubject: BacklogSubject(f.Kind, k.key),
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait: t.AckWait, MaxDeliver: t.MaxDeliver, MaxAckPending: t.MaxAckPending,
			Replicas: t.Replicas, MemoryStorage: t.Storage == jetstream.MemoryStorage,
			// A key's consumer goes when the key has been quiet a while.
			InactiveThreshold: time.Hour,
			Description:       "Backlog of fairness key " + k.key,
		})
		if err != nil {
			return 0, err
		}
		k.cons = c
	}
	var batch jetstream.MessageBatch
	var err error
	if wait {
		batch, err = k.cons.Fetch(n, jetstream.FetchMaxWait(claimWait))
	} else {
		batch, err = k.cons.FetchNoWait(n)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			k.cons = nil
		}
		return 0, err
	}
	got := 0
	for m := range batch.Messages() {
		got++
		subject := m.Headers().Get(bus.HeaderSubject)
		w, _ := strconv.ParseFloat(m.Headers().Get(HeaderWeight), 64)
		// A bad count (a hand-published step) counts as none.
		before, _ := strconv.ParseUint(m.Headers().Get(HeaderDelivered), 10, 64)
		before = min(before, uint64(max(0, f.Topology.MaxDeliver)))
		f.mu.Lock()
		if w >= protocol.MinFairWeight && w <= protocol.MaxFairWeight {
			k.weight = w
		}
		if f.stop {
			f.mu.Unlock()
			_ = m.Nak()
			continue
		}
		k.queue = append(k.queue, queued{msg: backlogMsg{Msg: m, subject: subject, before: before}, renewed: time.Now()})
		k.dry = false
		f.cond.Broadcast()
		f.mu.Unlock()
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, err
	}
	return got, nil
}

// dispatch gives each free slot to the key with work waiting (queued here,
// or in the backlog and not found dry), under its bound, that is furthest
// behind its share (stride scheduling: a key's pass advances by 1/weight
// per step; a key that was idle starts at the current virtual time, so it
// cannot claim a share for its idle time). A key that wins with nothing
// queued here has the slot claimed; its fetched steps fill its claims
// first.
func (f *Intake) dispatch() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		if f.stop {
			return
		}
		if f.Start != nil && f.idle == 0 && f.servers >= maxStartServers {
			// Every goroutine is starting a step: the next is free soon.
			f.cond.Wait()
			continue
		}
		var best, claimed *fairKey
		for _, k := range f.keys {
			if k.claims > 0 && len(k.queue) > 0 {
				claimed = k
				break
			}
		}
		if claimed == nil && f.free > 0 {
			for _, k := range f.keys {
				if len(k.queue) == 0 && (!k.feeding || k.dry || k.claims >= f.maxClaims()) || k.inflight >= f.KeySteps {
					continue
				}
				if best == nil || k.pass < best.pass || k.pass == best.pass && k.key < best.key {
					best = k
				}
			}
		}
		if claimed == nil && best == nil {
			f.gc()
			f.cond.Wait()
			continue
		}
		if claimed != nil {
			// Charged when claimed: the slot is its already.
			claimed.claims--
			f.take1(claimed)
			continue
		}
		best.pass = max(best.pass, f.vtime)
		f.vtime = best.pass
		best.pass += 1 / best.weight
		best.inflight++
		f.free--
		if len(best.queue) == 0 {
			best.claims++
			f.cond.Broadcast() // its feeder fetches for the claim
			continue
		}
		f.take1(best)
	}
}

// take1 hands key's first queued step to a worker goroutine, its slot
// already counted. f.mu is held; it is released while the step is handed.
func (f *Intake) take1(k *fairKey) {
	q := k.queue[0]
	k.queue[0] = queued{}
	k.queue = k.queue[1:]
	if q.held {
		k.held--
		k.heldBytes -= q.size
		f.held--
		f.heldBytes -= q.size
	}
	msg := q.msg
	f.cond.Broadcast() // the feeder may have room now
	if f.idle == 0 {
		// Started holding mu: Run closes f.work only after the
		// dispatcher returned, so the goroutine is counted by then.
		f.servers++
		f.workers.Go(func() { f.serve(fairItem{k, msg}) })
		return
	}
	// The worker reserved is at its receive or on its way there: the
	// send waits no longer than that.
	f.idle--
	f.mu.Unlock()
	f.work <- fairItem{k, msg}
	f.mu.Lock()
}

// serve is a worker goroutine: it handles it, then the steps handed to it
// while it is idle, until f.work closes.
func (f *Intake) serve(it fairItem) {
	for {
		// The message is the handling's alone: held here too, a long
		// call's step would keep it (bus.Consumer.Handle).
		k, msg, subject := it.k, it.msg, ""
		it = fairItem{}
		if f.Stage != nil {
			subject = msg.Subject()
			f.Stage(StageStarted, subject)
		}
		if f.Start != nil {
			f.handling.Add(1)
			var after bus.Settled = k
			if f.Stage != nil {
				after = &staged{k, subject}
			}
			f.inner.Start(f.workCtx, msg, f.ackWait, f.maxDeliver, f.starter, after)
			f.mu.Lock()
			f.idle++
			f.cond.Broadcast() // the dispatcher may wait for a goroutine
			f.mu.Unlock()
		} else {
			f.inner.Handle(f.workCtx, msg, f.ackWait, f.maxDeliver)
			f.handled(k, subject, true)
		}
		var ok bool
		if it, ok = <-f.work; !ok {
			return
		}
	}
}

// Settled frees the slot of the key's step started with Start
// (bus.Settled): the key is what a step in flight keeps of the intake.
func (k *fairKey) Settled() { k.f.handled(k, "", false) }

// staged is a started step's bus.Settled with the intake's Stage set:
// the subject it is told.
type staged struct {
	k       *fairKey
	subject string
}

func (s *staged) Settled() { s.k.f.handled(s.k, s.subject, false) }

// handled frees the slot of key k's step once its handling is over: the
// handler returned on the goroutine that is now idle, or a started step's
// done was called.
func (f *Intake) handled(k *fairKey, subject string, idle bool) {
	if f.Stage != nil {
		f.Stage(StageHandled, subject)
	}
	f.mu.Lock()
	k.inflight--
	f.free++
	if idle {
		f.idle++
	}
	f.cond.Broadcast()
	f.mu.Unlock()
	if !idle {
		f.handling.Done()
	}
}

// gc forgets keys with nothing here, so that a stream of one-off agents
// does not grow the map. f.mu is held.
func (f *Intake) gc() {
	if len(f.keys) < 1024 {
		return
	}
	for name, k := range f.keys {
		if k.inflight == 0 && len(k.queue) == 0 && !k.backlogged && !k.feeding && k.pending == 0 && k.claims == 0 {
			delete(f.keys, name)
		}
	}
}

// discover lists the backlog's keys of this kind, to serve the keys other
// workers spilled.
func (f *Intake) discover(ctx context.Context, backlog jetstream.Stream, bg *sync.WaitGroup) {
	t := time.NewTicker(f.Discover)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		counts, err := BacklogCounts(ctx, backlog, f.Kind)
		if err != nil {
			if ctx.Err() == nil {
				f.log().Debug("listing the backlog's keys", "err", err)
			}
			continue
		}
		f.mu.Lock()
		for key, n := range counts {
			if n > 0 {
				k := f.key(key)
				k.dry = false
				f.feed(k)
			}
		}
		f.mu.Unlock()
	}
}

// BacklogCounts are the steps waiting in the backlog, by key, for kind:
// the stream's subject counts (what `nats stream subjects TURN_BACKLOG`
// shows).
func BacklogCounts(ctx context.Context, backlog jetstream.Stream, kind string) (map[string]uint64, error) {
	prefix := bus.PrefixBacklog + "." + kind + "."
	info, err := backlog.Info(ctx, jetstream.WithSubjectFilter(prefix+"*"))
	if err != nil {
		return nil, err
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	for subj, n := range info.State.Subjects {
		out[BacklogKey(strings.TrimPrefix(subj, prefix))] = n
	}
	return out, nil
}

// handler is f.Handler, with the deliveries a spilled step had before its
// spill counted against maxDeliver: a step that fails on its last delivery
// from the backlog is dead-lettered rather than delivered again.
func (f *Intake) handler(maxDeliver int) bus.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		// What is read of msg is read before the handler runs: msg is not
		// kept while it runs.
		var before, delivered uint64
		if bm, ok := msg.(backlogMsg); ok && bm.before > 0 {
			before = bm.before
			if md, mdErr := bm.Metadata(); mdErr == nil {
				delivered = md.NumDelivered
			}
		}
		return f.limited(ctx, f.Handler(ctx, msg), delivered, before, maxDeliver)
	}
}

// starter is handler for a Start: a spilled step's deliveries before its
// spill count against the delivery limit.
func (f *Intake) starter(ctx context.Context, msg jetstream.Msg, done func(error)) {
	var before, delivered uint64
	if bm, ok := msg.(backlogMsg); ok && bm.before > 0 {
		before = bm.before
		if md, mdErr := bm.Metadata(); mdErr == nil {
			delivered = md.NumDelivered
		}
	}
	if before == 0 {
		f.Start(ctx, msg, done)
		return
	}
	f.Start(ctx, msg, func(err error) {
		done(f.limited(ctx, err, delivered, before, f.maxDeliver))
	})
}

// limited is a spilled step's handler error, with its deliveries before
// the spill (before) counted against maxDeliver: a dead letter once the
// limit is reached.
func (f *Intake) limited(ctx context.Context, err error, delivered, before uint64, maxDeliver int) error {
	var dl *bus.DeadLetter
	if err == nil || before == 0 || ctx.Err() != nil || errors.As(err, &dl) {
		return err
	}
	if delivered >= uint64(maxDeliver) {
		return &bus.DeadLetter{Reason: fmt.Sprintf("delivery limit reached: delivered %d times without success (%d before it waited in %s): %v", delivered, before, bus.StreamBacklog, err)}
	}
	return err
}

// renew keeps the leases of the steps queued here: every sixth of the ack
// wait, each one whose lease is a third of the ack wait old is told to the
// server as in progress (one message each, not waited for).
func (f *Intake) renew(ctx context.Context, ackWait time.Duration) {
	every := max(ackWait/6, 10*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	var due []jetstream.Msg
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		due = due[:0]
		f.mu.Lock()
		for _, k := range f.keys {
			for i := range k.queue {
				if q := &k.queue[i]; now.Sub(q.renewed) >= ackWait/3 {
					q.renewed = now
					due = append(due, q.msg)
				}
			}
		}
		f.mu.Unlock()
		for _, m := range due {
			_ = m.InProgress()
		}
		clear(due)
	}
}
