package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/agentbull/toolruntime/protocol"
)

// Options configure a [Client]. The zero value works.
type Options struct {
	// RequestTimeout bounds one catalog request and one publish when ctx
	// has no earlier deadline (default 10 s).
	RequestTimeout time.Duration
	// Logger receives what the client skips: malformed events and
	// messages it could not handle (default slog.Default()).
	Logger *slog.Logger
}

// Client is a gateway's connection to the workers. It is safe for
// concurrent use and holds no per-turn state: every turn's state is in
// the conversation the gateway keeps and in the streams.
type Client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	outputs jetstream.Stream // TURN_OUTPUTS, once looked up
	// core is whether runs read their step's events from core NATS
	// subscriptions: coreUnknown until the first run's subscriptions
	// were accepted (coreOn) or refused by the server's permissions
	// (coreOff, for the client's life).
	core coreState
}

// New returns a client over nc, which stays the caller's to close.
func New(nc *nats.Conn, opts Options) (*Client, error) {
	if nc == nil {
		return nil, errors.New("gateway: the NATS connection is nil")
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Client{nc: nc, js: js, opts: opts, log: log}, nil
}

// ServiceError is an error reply of the workers' micro service: Code 400
// for a request the gateway must fix (bad ids, an unknown kind or task),
// 413 for a catalog too large for one reply, 500 for a worker's failure.
type ServiceError struct {
	Code        string
	Description string
}

// Error is "turn.tools: <code> <description>".
func (e *ServiceError) Error() string {
	return fmt.Sprintf("turn.tools: %s %s", e.Code, e.Description)
}

// Catalog asks the workers for a turn's tool catalog. A worker's error
// reply is a *ServiceError; no worker answering is nats.ErrNoResponders.
// The reply's digest is checked against its tools; hand its Tools (or
// Definitions) to the model as they are.
func (c *Client) Catalog(ctx context.Context, agentID, turnID string, tc protocol.Context) (*protocol.CatalogReply, error) {
	req, err := json.Marshal(protocol.CatalogRequest{AgentID: agentID, TurnID: turnID, Context: tc})
	if err != nil {
		return nil, err
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	m := nats.NewMsg(protocol.SubjectTools)
	m.Data = req
	injectTrace(ctx, m.Header)
	reply, err := c.nc.RequestMsgWithContext(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("turn.tools: %w", err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, &ServiceError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
	}
	var cat protocol.CatalogReply
	if err := json.Unmarshal(reply.Data, &cat); err != nil {
		return nil, fmt.Errorf("turn.tools: the reply is not a catalog: %w", err)
	}
	sum := sha256.Sum256(cat.Tools)
	if got := hex.EncodeToString(sum[:]); got != cat.Digest {
		return nil, fmt.Errorf("turn.tools: the reply's digest %q is not that of its tools (%s)", cat.Digest, got)
	}
	return &cat, nil
}

// Cancel cancels a turn on every worker: its running calls are aborted,
// the step's step.done follows with end_turn set, and later steps of the
// turn run nothing. reason may be empty.
func (c *Client) Cancel(ctx context.Context, agentID, turnID, reason string) error {
	if !protocol.ValidID(agentID) || !protocol.ValidID(turnID) {
		return fmt.Errorf("cancel: agent and turn ids must be 1-64 characters of [A-Za-z0-9_-]")
	}
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCancel, agentID, turnID))
	if reason != "" {
		m.Data, _ = json.Marshal(protocol.Cancel{Reason: reason})
	}
	injectTrace(ctx, m.Header)
	if err := c.nc.PublishMsg(m); err != nil {
		return fmt.Errorf("cancel: %w", err)
	}
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	// A cancel is core NATS: flushing is what says the server has it.
	return c.nc.FlushWithContext(ctx)
}

// Decide answers a pending step (see [protocol.StepPending]) with a decision for
// every pending call. n numbers the answers to that step: 1 for the
// first, 2, 3, … for a correction after an answer was dead-lettered (one
// that missed a call or named an unknown one), so that the stream's
// de-duplication does not drop it. The first complete answer decides.
func (c *Client) Decide(ctx context.Context, agentID, turnID string, step int64, n int, decisions []protocol.Decision) error {
	switch {
	case !protocol.ValidID(agentID) || !protocol.ValidID(turnID):
		// A dot would put the answer on another subject of TURN_APPROVALS:
		// one no worker reads, or another turn's timeout or cancel note.
		return fmt.Errorf("decide: agent and turn ids must be 1-64 characters of [A-Za-z0-9_-]")
	case step < 0 || len(decisions) == 0:
		return fmt.Errorf("decide: step %d with %d decisions; a step is 0 or more, and every pending call needs a decision", step, len(decisions))
	case n < 1:
		return fmt.Errorf("decide: n is %d; the first answer is 1", n)
	}
	body, err := json.Marshal(struct {
		AgentID   string              `json:"agent_id"`
		TurnID    string              `json:"turn_id"`
		Step      int64               `json:"step"`
		Decisions []protocol.Decision `json:"decisions"`
	}{agentID, turnID, step, decisions})
	if err != nil {
		return err
	}
	m := nats.NewMsg(protocol.Subject(protocol.PrefixApproval, agentID, turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.ApprovalMsgID(agentID, turnID, step, n))
	return c.publish(ctx, m)
}

func (c *Client) publish(ctx context.Context, m *nats.Msg) error {
	_, err := c.publishAck(ctx, m)
	return err
}

func (c *Client) publishAck(ctx context.Context, m *nats.Msg) (*jetstream.PubAck, error) {
	injectTrace(ctx, m.Header)
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	ack, err := c.js.PublishMsg(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("publish %s: %w", m.Subject, err)
	}
	return ack, nil
}

// bounded is ctx with the request timeout unless it ends sooner.
func (c *Client) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) < c.opts.RequestTimeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.RequestTimeout)
}

// SendOption changes what [Client.Send] streams.
type SendOption func(*sendConfig)

type sendConfig struct{ activity bool }

// WithActivity adds the step's [protocol.Activity] events (core NATS, best effort:
// missed while disconnected) to what [StepRun.Next] returns.
func WithActivity() SendOption { return func(c *sendConfig) { c.activity = true } }

// Send publishes a step and returns the run that streams its events. The
// step is checked first by the worker's own parser: a step the workers
// would dead-letter is an error wrapping protocol.ErrMalformed and is not
// published. The subscription to the turn's events is made before the
// publish, and the publish carries Nats-Msg-Id <agent>.<turn>.<step> (and
// ctx's trace context), so sending the same step again after a crash is
// safe: the stream drops the copy (or, past its duplicate window, the
// workers answer it from their journal), and the run reads the events the
// first one caused, from the turn's start. (A step number goes with one output: the model's response
// for step N is sent as it was, never replaced by another.) Close the run
// when done.
//
// The run reads core NATS subscriptions to the turn's subjects first, and
// the streams when those may have missed an event (a reconnect, a dropped
// message, a step not done within a few seconds): no consumer is created
// per step. A connection whose permissions refuse those subscriptions
// reads the streams only; allow it to subscribe to turn.call.output.*.*
// and turn.dead.*.* for the fast path.
func (c *Client) Send(ctx context.Context, s protocol.Step, opts ...SendOption) (*StepRun, error) {
	var cfg sendConfig
	for _, o := range opts {
		o(&cfg)
	}
	if s.Output == nil {
		s.Output = []json.RawMessage{}
	}
	for i, item := range s.Output {
		// A nil item marshals as null, which the workers skip: the step
		// would run, and the conversation the gateway sends back to the
		// provider would hold a null it refuses.
		if t := bytes.TrimSpace(item); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			return nil, fmt.Errorf("%w: output[%d] is empty or null; every item is an object", protocol.ErrMalformed, i)
		}
		if !json.Valid(item) {
			return nil, fmt.Errorf("%w: output[%d] is not JSON: %.100q", protocol.ErrMalformed, i, item)
		}
	}
	body, err := json.Marshal(struct {
		AgentID string            `json:"agent_id"`
		TurnID  string            `json:"turn_id"`
		Step    int64             `json:"step"`
		Context protocol.Context  `json:"context"`
		Output  []json.RawMessage `json:"output"`
	}{s.AgentID, s.TurnID, s.Step, s.Context, s.Output})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", protocol.ErrMalformed, err)
	}
	prefix := protocol.PrefixCall
	if s.Context.Kind == protocol.KindWorkflowTask {
		prefix = protocol.PrefixTask
	}
	subject := protocol.Subject(prefix, s.AgentID, s.TurnID)
	parsed, err := protocol.ParseStep(prefix, subject, body, int(c.nc.MaxPayload()))
	if err != nil {
		return nil, err // wraps protocol.ErrMalformed, as the workers' refusal would
	}
	if err := checkKind(prefix, s.Context); err != nil {
		return nil, err
	}
	// The worker's other refusal of a parsed step: more calls than one
	// step.done can answer, even with every output clipped to a note.
	if need, budget := protocol.MinStepDoneBytes(parsed), protocol.EventBudget(c.nc.MaxPayload()); need > budget {
		return nil, fmt.Errorf("%w: its %d calls need a step.done of at least %d bytes, over the %d byte limit of one event; send fewer calls per step",
			protocol.ErrMalformed, len(parsed.Calls), need, budget)
	}
	r := newRun(c, parsed)
	core := c.coreReads()
	if core {
		// The step's events are read from core NATS subscriptions made
		// before the publish; the stream is read only when they may have
		// missed something (see StepRun.fallback).
		if err := r.subscribeCore(ctx, cfg); err != nil {
			r.Close()
			return nil, err
		}
		if !c.coreReads() {
			// The first run's subscriptions were refused (permissions).
			r.dropCore()
			core = false
		} else if err := r.readPrior(ctx); err != nil {
			r.Close()
			return nil, err
		}
	}
	if !core {
		start, err := c.readStart(ctx, parsed)
		if err != nil {
			r.Close()
			return nil, err
		}
		if err := r.subscribe(cfg, start); err != nil {
			r.Close()
			return nil, err
		}
	}
	m := nats.NewMsg(subject)
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(s.AgentID, s.TurnID, s.Step))
	ack, err := c.publishAck(ctx, m)
	if err != nil {
		r.Close()
		return nil, err
	}
	if ack.Duplicate {
		r.copy = true
		if err := r.readAll(); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// readStart is the TURN_OUTPUTS sequence a step's run reads the turn's
// events from. The events of a step sent for the first time all come
// after its publish, so the run skips the turn's earlier steps' events
// rather than read the turn's whole history again for every step: it
// starts after the last event on the turn's subject. When that event is
// of this step or a later one, the step was sent before; its events may
// be all there already, and those the workers publish again carry the
// same message ids, which the stream drops while its window lasts (it
// opened when they were first published, later than the steps stream's
// window for the step, which may be over, so that the publish is no
// duplicate). That run reads the turn from its start. Step 0 has no
// history to skip.
func (c *Client) readStart(ctx context.Context, st *protocol.Step) (uint64, error) {
	if st.Step == 0 {
		return 1, nil
	}
	seq, earlier, err := c.turnHead(ctx, st)
	if err != nil {
		return 0, err
	}
	if !earlier {
		return 1, nil
	}
	return seq + 1, nil
}

// turnHead looks up the last event on st's turn subject: its sequence,
// and whether it is of a step before st (false when there is none, or
// its step cannot be read).
func (c *Client) turnHead(ctx context.Context, st *protocol.Step) (seq uint64, earlier bool, err error) {
	ctx, cancel := c.bounded(ctx)
	defer cancel()
	stream, err := c.outputsStream(ctx)
	if err != nil {
		return 0, false, err
	}
	last, err := stream.GetLastMsgForSubject(ctx, protocol.Subject(protocol.PrefixOutput, st.AgentID, st.TurnID))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("stream %s: %w", protocol.StreamOutputs, err)
	}
	var head struct {
		Step *int64 `json:"step"`
	}
	ok := json.Unmarshal(last.Data, &head) == nil && head.Step != nil && *head.Step < st.Step
	return last.Sequence, ok, nil
}

// outputsStream is the handle of TURN_OUTPUTS, looked up once: its
// calls name the stream, so it stays good while the client lives.
func (c *Client) outputsStream(ctx context.Context) (jetstream.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outputs == nil {
		s, err := c.js.Stream(ctx, protocol.StreamOutputs)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", protocol.StreamOutputs, err)
		}
		c.outputs = s
	}
	return c.outputs, nil
}

// checkKind refuses what the worker would dead-letter beyond ParseStep:
// a task step without its workflow and task.
func checkKind(prefix string, tc protocol.Context) error {
	if prefix == protocol.PrefixTask && (tc.WorkflowID == "" || tc.TaskID == "") {
		return fmt.Errorf("%w: a workflow_task context needs workflow_id and task_id", protocol.ErrMalformed)
	}
	return nil
}
