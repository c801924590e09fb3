package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/protocol"
)

// The fair share's stream (package fairshare moves steps there and
// serves them from it); this worker's own, not the protocol's.
const (
	// StreamBacklog holds the steps waiting for their key's share.
	StreamBacklog = "TURN_BACKLOG"
	// PrefixBacklog is its subjects' prefix: turn.backlog.<kind>.<token>.
	PrefixBacklog = "turn.backlog"
	// HeaderSubject is the subject a step moved to TURN_BACKLOG was
	// published on: its dead letter is filed under it.
	HeaderSubject = "Turn-Subject"
)

// Topology is how the protocol's streams, consumers and buckets are laid
// out on the server. The zero value of each field takes the default.
type Topology struct {
	Replicas int
	Storage  jetstream.StorageType
	// MaxMsgSize bounds a step message; larger ones are refused by the
	// server and, when they get in, dead-lettered by the worker.
	MaxMsgSize int32
	// OutputsMaxAge is how long events are kept (24 h).
	OutputsMaxAge time.Duration
	// DeadMaxAge is how long dead letters are kept (7 days).
	DeadMaxAge time.Duration
	// DuplicateWindow of the streams the worker publishes to; it must
	// cover the longest redelivery span of the consumers.
	DuplicateWindow time.Duration
	// AckWait and MaxDeliver of the work consumers.
	AckWait    time.Duration
	MaxDeliver int
	// MaxAckPending bounds the steps out with the fleet at once (65,536):
	// running, and held by the workers' intakes for their key's share
	// (fairshare.Intake.HoldSteps, 32,768 a worker by default).
	MaxAckPending int
	// StateTTL is how long per-turn state lives in TURN_STATE (25 h: a
	// step pending approval waits there, 24 h by default).
	StateTTL time.Duration
	// RetryDelay is the delay before a failed step is delivered again
	// the first time (1 s); it doubles per attempt, up to MaxRetryDelay.
	// Tests set it short so that redeliveries end soon.
	RetryDelay time.Duration
}

// WithDefaults fills the zero fields.
func (t Topology) WithDefaults() Topology {
	if t.Replicas == 0 {
		t.Replicas = 1
	}
	if t.MaxMsgSize == 0 {
		t.MaxMsgSize = 1 << 20
	}
	if t.OutputsMaxAge == 0 {
		t.OutputsMaxAge = 24 * time.Hour
	}
	if t.DeadMaxAge == 0 {
		t.DeadMaxAge = 7 * 24 * time.Hour
	}
	if t.AckWait == 0 {
		t.AckWait = 30 * time.Second
	}
	if t.MaxDeliver == 0 {
		t.MaxDeliver = 5
	}
	if t.MaxAckPending == 0 {
		t.MaxAckPending = 1 << 16
	}
	if t.StateTTL == 0 {
		t.StateTTL = 25 * time.Hour
	}
	if t.RetryDelay == 0 {
		t.RetryDelay = time.Second
	}
	if t.DuplicateWindow == 0 {
		t.DuplicateWindow = max(2*time.Minute, t.RedeliverySpan())
	}
	return t
}

// RedeliverySpan is the longest time between a step's first delivery and
// its last: every attempt may use its whole ack wait, plus the longest
// retry delay between attempts.
func (t Topology) RedeliverySpan() time.Duration {
	return time.Duration(t.MaxDeliver) * (t.AckWait + MaxRetryDelay)
}

// Validate checks the topology after defaults.
func (t Topology) Validate() error {
	switch {
	case t.Replicas < 1 || t.Replicas > 5:
		return fmt.Errorf("replicas must be 1 to 5, not %d", t.Replicas)
	case t.AckWait < time.Second:
		return fmt.Errorf("ack wait must be at least 1s, not %s", t.AckWait)
	case t.RetryDelay < 0 || t.RetryDelay > MaxRetryDelay:
		return fmt.Errorf("retry delay must be from 0 (the default, 1s) to %s, not %s", MaxRetryDelay, t.RetryDelay)
	case t.MaxDeliver < 1:
		return fmt.Errorf("max deliver must be at least 1, not %d", t.MaxDeliver)
	case t.DuplicateWindow < t.RedeliverySpan():
		return fmt.Errorf("duplicate window %s is shorter than the consumers' redelivery span %s (max deliver × (ack wait + %s)): a redelivered step could publish its events twice",
			t.DuplicateWindow, t.RedeliverySpan(), MaxRetryDelay)
	case t.MaxAckPending < 1:
		return fmt.Errorf("max ack pending must be at least 1, not %d", t.MaxAckPending)
	}
	return nil
}

// Streams returns the stream configurations of the protocol.
func (t Topology) Streams() []jetstream.StreamConfig {
	base := func(name string, subjects ...string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name: name, Subjects: subjects, Replicas: t.Replicas, Storage: t.Storage,
			Duplicates: t.DuplicateWindow, Discard: jetstream.DiscardOld,
		}
	}
	calls := base(protocol.StreamCalls, protocol.PrefixCall+".*.*")
	calls.Retention = jetstream.WorkQueuePolicy
	calls.MaxMsgSize = t.MaxMsgSize
	calls.Description = "Steps of main turns, from the gateway to the workers"
	tasks := base(protocol.StreamTasks, protocol.PrefixTask+".*.*")
	tasks.Retention = jetstream.WorkQueuePolicy
	tasks.MaxMsgSize = t.MaxMsgSize
	tasks.Description = "Steps of workflow task turns, from the gateway to the workers"
	outputs := base(protocol.StreamOutputs, protocol.PrefixOutput+".*.*")
	outputs.MaxAge = t.OutputsMaxAge
	outputs.Description = "call.output and step.done events, from the workers to the gateway"
	dead := base(protocol.StreamDead, protocol.PrefixDead+".*.*")
	dead.MaxAge = t.DeadMaxAge
	dead.Description = "Steps that could not be processed, with Dead-Reason"
	events := base(protocol.StreamWorkflows, protocol.PrefixWFEvt+".*")
	events.Description = "Workflow lifecycle events"
	// Answers, and the timers of pending steps: the server fires a timer
	// only into a subject of its own stream.
	approvals := base(protocol.StreamApprovals, protocol.PrefixApproval+".>")
	approvals.Retention = jetstream.WorkQueuePolicy
	approvals.MaxMsgSize = t.MaxMsgSize
	// The server switches rollups on for a stream with scheduling; asking
	// for them keeps the worker's definition equal to the server's.
	approvals.AllowMsgSchedules, approvals.AllowRollup = true, true
	approvals.Description = "Approval answers for pending steps, from the gateway to the workers, and the steps' timeout timers"
	// Fair share: steps waiting for their key's share, one subject per
	// kind and key (turn.backlog.<call|task>.<key token>). A spilled step
	// carries a few headers more than it had.
	backlog := base(StreamBacklog, PrefixBacklog+".*.*")
	backlog.Retention = jetstream.WorkQueuePolicy
	backlog.MaxMsgSize = t.MaxMsgSize + 1024
	backlog.Description = "Steps waiting for their fairness key's share, moved from TURN_CALLS and TURN_TASKS by the workers"
	return []jetstream.StreamConfig{calls, tasks, outputs, dead, events, approvals, backlog}
}

// Consumers returns the work consumers, by stream.
func (t Topology) Consumers() map[string]jetstream.ConsumerConfig {
	c := func(name string) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{
			Durable: name, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait: t.AckWait, MaxDeliver: t.MaxDeliver, MaxAckPending: t.MaxAckPending,
			Replicas: t.Replicas, MemoryStorage: t.Storage == jetstream.MemoryStorage,
		}
	}
	// Everything of TURN_APPROVALS but the timers, which the work queue
	// keeps until they fire onto the timeout subject.
	approvals := c(protocol.ConsumerApprovals)
	approvals.FilterSubjects = ApprovalSubjects()
	return map[string]jetstream.ConsumerConfig{
		protocol.StreamCalls:     c(protocol.ConsumerCalls),
		protocol.StreamTasks:     c(protocol.ConsumerTasks),
		protocol.StreamApprovals: approvals,
	}
}

// ApprovalSubjects are the subjects of TURN_APPROVALS that workers
// consume: the gateway's answers, fired timers, and cancels of turns.
func ApprovalSubjects() []string {
	return []string{protocol.PrefixApproval + ".*.*", protocol.PrefixApprovalTimeout + ".*.*.*", protocol.PrefixApprovalCancel + ".*.*"}
}

// Buckets returns the key-value bucket configurations.
func (t Topology) Buckets() []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: protocol.BucketState, Description: "Per-turn and per-call state", TTL: t.StateTTL, History: 1, Replicas: t.Replicas, Storage: t.Storage},
		{Bucket: protocol.BucketWorkflows, Description: "Workflows, tasks, result schemas and committed results", History: 1, Replicas: t.Replicas, Storage: t.Storage},
	}
}

// ErrIncompatible is wrapped when an existing stream, consumer or bucket
// cannot be brought to the configuration the worker needs.
var ErrIncompatible = errors.New("incompatible existing configuration")

// Setup creates or updates every stream, consumer and bucket of the
// protocol. An existing one that differs in a way the server cannot change
// (retention, storage, ack policy, …) stops it with an error saying what
// differs.
//
// Workers of a fleet often start together and race to create the same
// streams; on a fresh cluster a create can then time out while the meta
// leader settles. Each step is retried with backoff (a few seconds per
// attempt) until ctx ends; only an incompatible configuration stops at once.
func Setup(ctx context.Context, js jetstream.JetStream, t Topology) error {
	for _, want := range t.Streams() {
		if err := retrySetup(ctx, func(ctx context.Context) error { return ensureStream(ctx, js, want) }); err != nil {
			return err
		}
	}
	for stream, want := range t.Consumers() {
		if err := retrySetup(ctx, func(ctx context.Context) error { return ensureConsumer(ctx, js, stream, want) }); err != nil {
			return err
		}
	}
	for _, want := range t.Buckets() {
		if err := retrySetup(ctx, func(ctx context.Context) error { return ensureBucket(ctx, js, want) }); err != nil {
			return err
		}
	}
	return nil
}

func retrySetup(ctx context.Context, step func(context.Context) error) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval, b.MaxElapsedTime = 200*time.Millisecond, 3*time.Second, 0
	var last error
	for {
		attempt, cancel := context.WithTimeout(ctx, 8*time.Second)
		err := step(attempt)
		cancel()
		if err == nil || errors.Is(err, ErrIncompatible) {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %v)", last, context.Cause(ctx))
		case <-time.After(b.NextBackOff()):
		}
	}
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := js.CreateStream(ctx, want); err != nil {
			return fmt.Errorf("creating stream %s: %w", want.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	var diffs []string
	if have.Retention != want.Retention {
		diffs = append(diffs, fmt.Sprintf("retention is %s, the worker needs %s", have.Retention, want.Retention))
	}
	if have.Storage != want.Storage {
		diffs = append(diffs, fmt.Sprintf("storage is %s, the worker is configured for %s", have.Storage, want.Storage))
	}
	if len(diffs) > 0 {
		return incompatible("stream", want.Name, diffs)
	}
	// Keep what an operator tuned that the worker does not care about.
	upd := have
	upd.Subjects, upd.Replicas, upd.Duplicates, upd.MaxMsgSize, upd.MaxAge, upd.Description =
		want.Subjects, want.Replicas, want.Duplicates, want.MaxMsgSize, want.MaxAge, want.Description
	// Message scheduling can be switched on, never off.
	upd.AllowMsgSchedules = have.AllowMsgSchedules || want.AllowMsgSchedules
	if slices.Equal(have.Subjects, upd.Subjects) && have.Replicas == upd.Replicas && have.Duplicates == upd.Duplicates &&
		have.MaxMsgSize == upd.MaxMsgSize && have.MaxAge == upd.MaxAge && have.Description == upd.Description &&
		have.AllowMsgSchedules == upd.AllowMsgSchedules {
		return nil
	}
	if _, err := js.UpdateStream(ctx, upd); err != nil {
		return refused(ctx, err, "updating stream "+want.Name)
	}
	return nil
}

func ensureConsumer(ctx context.Context, js jetstream.JetStream, stream string, want jetstream.ConsumerConfig) error {
	c, err := js.Consumer(ctx, stream, want.Durable)
	if err == nil {
		have := c.CachedInfo().Config
		var diffs []string
		if have.AckPolicy != want.AckPolicy {
			diffs = append(diffs, fmt.Sprintf("ack policy is %s, the worker needs %s", have.AckPolicy, want.AckPolicy))
		}
		if have.DeliverSubject != "" {
			diffs = append(diffs, "it is a push consumer, the worker needs a pull consumer")
		}
		switch {
		case len(want.FilterSubjects) > 0:
			if have.FilterSubject != "" || !slices.Equal(have.FilterSubjects, want.FilterSubjects) {
				diffs = append(diffs, fmt.Sprintf("it filters on %q%v, the worker needs %v", have.FilterSubject, have.FilterSubjects, want.FilterSubjects))
			}
		case have.FilterSubject != "" || len(have.FilterSubjects) > 0:
			diffs = append(diffs, fmt.Sprintf("it filters on %q%v, the worker consumes the whole stream", have.FilterSubject, have.FilterSubjects))
		}
		if len(diffs) > 0 {
			return incompatible("consumer", stream+" > "+want.Durable, diffs)
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("looking up consumer %s > %s: %w", stream, want.Durable, err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, want); err != nil {
		return refused(ctx, err, "consumer "+stream+" > "+want.Durable)
	}
	return nil
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) error {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if err == nil {
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("reading bucket %s: %w", want.Bucket, err)
		}
		si := st.(*jetstream.KeyValueBucketStatus).StreamInfo()
		if si.Config.Storage != want.Storage {
			return incompatible("bucket", want.Bucket, []string{fmt.Sprintf("storage is %s, the worker is configured for %s", si.Config.Storage, want.Storage)})
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("looking up bucket %s: %w", want.Bucket, err)
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, want); err != nil {
		return refused(ctx, err, "bucket "+want.Bucket)
	}
	return nil
}

// refused classifies a failed create or update: the server's refusal is
// an incompatible configuration; running out of time is worth another try.
func refused(ctx context.Context, err error, what string) error {
	var apiErr *jetstream.APIError
	if ctx.Err() != nil || !errors.As(err, &apiErr) || apiErr.Code == 503 || apiErr.Code == 408 {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %v", ErrIncompatible, what, err)
}

func incompatible(kind, name string, diffs []string) error {
	return fmt.Errorf("%w: %s %s exists but %s (change the worker's configuration to match, or remove it with the NATS CLI)",
		ErrIncompatible, kind, name, strings.Join(diffs, "; "))
}
