package mcpdoor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

// functionCall is the output item of the one-call step a tools/call
// becomes.
type functionCall struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// randomID is "<prefix>-" and 26 characters of base32 of 16 random bytes.
func randomID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + strings.ToLower(b32.EncodeToString(b[:]))
}

// callMeta is what a tools/call's _meta may name.
type callMeta struct {
	Turn   string // "" for a fresh turn
	CallID string // "" for a fresh call id
}

// parseCallMeta reads the door's keys of a request's _meta: MetaTurn a
// protocol id, MetaCall a call id. Anything else of _meta is left alone.
func parseCallMeta(meta map[string]any) (callMeta, error) {
	var m callMeta
	if v, ok := meta[MetaTurn]; ok {
		s, ok := v.(string)
		if !ok || !protocol.ValidID(s) {
			return m, fmt.Errorf("_meta %q must be a string of 1-64 characters [A-Za-z0-9_-]", MetaTurn)
		}
		m.Turn = s
	}
	if v, ok := meta[MetaCall]; ok {
		s, ok := v.(string)
		if !ok || !protocol.ValidCallID(s) || len(s) > 64 || strings.ContainsAny(s, ". *>") {
			return m, fmt.Errorf("_meta %q must be a string of 1-64 printable characters without '.', ' ', '*' or '>'", MetaCall)
		}
		m.CallID = s
	}
	return m, nil
}

func invalidParams(err error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
}

// callHandler runs one tools/call as a one-call step of a turn of the
// principal's agent.
func (d *Door) callHandler(p *Principal, t catalogTool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
		ctx = traceFromMeta(ctx, req.Params.Meta)
		ctx, stopCancels := d.cancellable(ctx)
		defer stopCancels()
		ctx, end := d.startCall(ctx, t.name)
		defer func() { end(outcome(ctx, res, err), err) }()
		meta, err := parseCallMeta(req.Params.Meta)
		if err != nil {
			return nil, invalidParams(err)
		}
		tasks := clientHasTasks(req.ClientCapabilities())
		if d.taskRequired(t.name) && !tasks {
			return nil, missingTasks("the tool " + t.name)
		}
		args := string(req.Params.Arguments)
		if strings.TrimSpace(args) == "" || args == "null" {
			args = "{}"
		}
		var c *callRun
		if req.Params.RequestState != "" {
			if c, err = d.answer(ctx, p, t, req, args); err != nil {
				return nil, err
			}
		} else {
			c = &callRun{d: d, p: p, req: req, toolName: t.name, turn: meta.Turn, callID: meta.CallID, named: meta.Turn != ""}
			if c.turn == "" {
				c.turn = randomID("mcp")
			} else if meta.CallID != "" {
				if c.step, err = d.callStep(ctx, p.AgentID, c.turn, meta.CallID); err != nil {
					return nil, err
				}
			} else if c.step, err = d.nextStep(ctx, p.AgentID, c.turn); err != nil {
				return nil, err
			}
			if c.callID == "" {
				c.callID = randomID("mcp")
			}
		}
		var item []byte
		switch {
		case t.isSearch():
			var q json.RawMessage = json.RawMessage(args)
			item, _ = json.Marshal(searchCall{Type: protocol.ItemToolSearchCall, CallID: c.callID, Execution: "client", Arguments: q})
		default:
			if t.deferred() && req.Params.RequestState == "" {
				if err := d.loadDeferred(ctx, c, t); err != nil {
					return nil, err
				}
			}
			item, _ = json.Marshal(functionCall{Type: "function_call", CallID: c.callID, Namespace: t.namespace, Name: t.call, Arguments: args})
		}
		// A retry with a requestState sends the held step again: the
		// stream drops the copy and the run reads the step's events.
		st := protocol.Step{AgentID: p.AgentID, TurnID: c.turn, Step: c.step, Context: p.Context(), Output: []json.RawMessage{item}}
		run, err := d.gw.Send(ctx, st, gateway.WithActivity())
		if err != nil {
			if errors.Is(err, protocol.ErrMalformed) {
				return nil, invalidParams(err)
			}
			return nil, fmt.Errorf("publishing the call: %w", err)
		}
		c.args = args
		if box, _ := ctx.Value(taskBoxKey{}).(*taskBox); tasks && box != nil {
			// A client of the tasks extension gets a task when the call
			// runs past TaskAfter (at once for a tool that runs only as
			// a task), or when it is held for approval (wait).
			c.plan = &taskPlan{at: time.Now().Add(d.cfg.TaskAfter), box: box}
			if d.taskRequired(t.name) {
				c.plan.at = time.Now()
			}
		}
		return c.wait(ctx, run)
	}
}

// searchCall is the output item of the step a tool_search call becomes.
type searchCall struct {
	Type      string          `json:"type"`
	CallID    string          `json:"call_id"`
	Execution string          `json:"execution"`
	Arguments json.RawMessage `json:"arguments"`
}

// isSearch reports whether t is the catalog's tool search.
func (t catalogTool) isSearch() bool { return t.name == ToolSearchName && t.call == "" }

// deferred reports whether t is a deferred tool, which a turn must load
// before calling it.
func (t catalogTool) deferred() bool { return t.tool.Meta[MetaDeferred] == true }

// loadDeferred loads a deferred tool into the call's turn, as a model
// would: a step of its own with a tool_search call whose query is the
// tool's name (the search ranks a tool's name twice, so it comes first),
// before the call's step. A search that does not load it leaves the call
// to the worker's not_loaded error, which the client reads.
func (d *Door) loadDeferred(ctx context.Context, c *callRun, t catalogTool) error {
	query := t.call
	if t.namespace != "" {
		query = t.namespace + " " + t.call
	}
	q, _ := json.Marshal(map[string]string{"query": query})
	searchID := randomID("mcp-load")
	item, _ := json.Marshal(searchCall{Type: protocol.ItemToolSearchCall, CallID: searchID, Execution: "client", Arguments: q})
	st := protocol.Step{AgentID: c.p.AgentID, TurnID: c.turn, Step: c.step, Context: c.p.Context(), Output: []json.RawMessage{item}}
	run, err := d.gw.Send(ctx, st)
	if err != nil {
		return fmt.Errorf("loading the deferred tool %s: %w", t.name, err)
	}
	defer run.Close()
	for {
		ev, err := run.Next(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			var bad *gateway.EventError
			if errors.As(err, &bad) {
				continue
			}
			return fmt.Errorf("loading the deferred tool %s: %w", t.name, err)
		}
		// The step's end, not the search's output: the worker keeps what
		// the search loaded when the step is done, and the call's step
		// may reach it before that otherwise.
		if _, ok := ev.(*protocol.StepDone); ok {
			break
		}
	}
	if !c.named {
		c.step++
		return nil
	}
	c.step, err = d.nextStep(ctx, c.p.AgentID, c.turn)
	return err
}

// callRun follows one call's step until its output.
type callRun struct {
	d      *Door
	p      *Principal
	req    *mcp.CallToolRequest
	turn   string
	step   int64
	callID string
	named  bool

	toolName string // the MCP name
	args     string
	// decided: this request sent the held call's decision (or is the
	// wait path's), so a step.pending read again is not asked again.
	decided bool

	progress float64
	total    float64

	// plan, for a client that declared the tasks extension, is when the
	// call becomes a task.
	plan *taskPlan
}

// wait reads the step's events until the call's output, and closes run
// (or hands it to the cancel, which closes it).
func (c *callRun) wait(ctx context.Context, run *gateway.StepRun) (*mcp.CallToolResult, error) {
	handed := false
	defer func() {
		if !handed {
			run.Close()
		}
	}()
	var deadline time.Time // set once the call is held for approval
	label := ""
	for {
		nctx, stop := ctx, context.CancelFunc(func() {})
		if c.plan != nil {
			if !time.Now().Before(c.plan.at) {
				return c.toTask(taskWorking), nil
			}
			nctx, stop = context.WithDeadline(ctx, c.plan.at)
		} else if !deadline.IsZero() {
			if !time.Now().Before(deadline) {
				return c.stillHeld(), nil
			}
			// A person decides elsewhere (the console, a gateway); the
			// request stays open, telling the client every 15 s.
			tick := time.Now().Add(approvalTick)
			if deadline.Before(tick) {
				tick = deadline
			}
			nctx, stop = context.WithDeadline(ctx, tick)
		}
		ev, err := run.Next(nctx)
		stop()
		var bad *gateway.EventError
		var dead *gateway.DeadLetterError
		switch {
		case err == nil:
		case ctx.Err() != nil:
			handed = true
			go c.cancel(run)
			return nil, ctx.Err()
		case nctx.Err() != nil:
			c.notifyText(ctx, label)
			continue
		case errors.As(err, &bad):
			continue
		case errors.As(err, &dead) && !dead.Step:
			continue
		case errors.Is(err, io.EOF):
			return nil, errors.New("the step ended without the call's output")
		default:
			return nil, err
		}
		switch ev := ev.(type) {
		case *protocol.Activity:
			if ev.CallID == c.callID {
				c.notify(ctx, ev)
			}
		case *protocol.CallOutput:
			if ev.CallID == c.callID {
				return toResult(ev), nil
			}
		case *protocol.StepPending:
			if c.plan != nil && !c.decided {
				return c.toTask(taskInputRequired), nil
			}
			if !c.decided && mrtrClient(c.req) {
				return c.inputRequired(ev, c.args), nil
			}
			label = "waiting for a person's approval"
			for _, a := range ev.Approvals {
				if a.CallID == c.callID && a.Activity != "" {
					label += ": " + a.Activity
				}
			}
			deadline = time.Now().Add(c.d.cfg.ApprovalWait)
			c.notifyText(ctx, label)
		}
	}
}

// approvalTick is how often a held call tells its client it still waits.
const approvalTick = 15 * time.Second

func (c *callRun) stillHeld() *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
		"The call is still waiting for a person's approval. Call again with _meta %q = %q and %q = %q to pick up its outcome.",
		MetaTurn, c.turn, MetaCall, c.callID)}}}
}

// notify turns a call's activity into a progress notification, when the
// client asked for them; progress only grows.
func (c *callRun) notify(ctx context.Context, ev *protocol.Activity) {
	tok := c.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	switch ev.State {
	case "started":
	case "progress":
		if ev.Progress != nil {
			if v := float64(ev.Progress.Done); v > c.progress {
				c.progress = v
			}
			if ev.Progress.Total != nil {
				c.total = float64(*ev.Progress.Total)
			}
		}
	case "completed":
		if c.total > 0 {
			c.progress = max(c.progress, c.total)
		} else {
			c.progress++
		}
	default:
		return
	}
	_ = c.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: c.progress, Total: c.total, Message: ev.Label})
}

func (c *callRun) notifyText(ctx context.Context, msg string) {
	tok := c.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	_ = c.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: c.progress, Total: c.total, Message: msg})
}

// cancel cancels the call on the workers when its request ended first.
// A fresh turn holds this call alone, so cancelling the turn cancels
// exactly it. A named turn's other calls must go on: its step alone is
// cancelled (turn.cancel.step), again every second while the call's
// output has not come, since a step still queued for its share is not
// running yet, up to stepCancelFor.
func (c *callRun) cancel(run *gateway.StepRun) {
	defer run.Close()
	ctx, stop := context.WithTimeout(context.Background(), stepCancelFor)
	defer stop()
	const reason = "cancelled by the MCP client"
	if !c.named {
		if err := c.d.gw.Cancel(ctx, c.p.AgentID, c.turn, reason); err != nil {
			c.d.log.Warn("mcp door: cancel failed", "agent", c.p.AgentID, "turn", c.turn, "err", err)
		}
		return
	}
	subject := protocol.PrefixCancelStep + "." + c.p.AgentID + "." + c.turn
	body, _ := json.Marshal(protocol.CancelStep{Step: c.step, Reason: reason})
	for {
		if err := c.d.cfg.NC.Publish(subject, body); err != nil {
			c.d.log.Warn("mcp door: step cancel failed", "agent", c.p.AgentID, "turn", c.turn, "step", c.step, "err", err)
		}
		tick, stopTick := context.WithTimeout(ctx, time.Second)
		for {
			ev, err := run.Next(tick)
			if out, ok := ev.(*protocol.CallOutput); ok && out.CallID == c.callID {
				stopTick()
				return
			}
			if err == nil {
				continue
			}
			if tick.Err() != nil {
				break // publish again
			}
			var bad *gateway.EventError
			if errors.As(err, &bad) {
				continue
			}
			stopTick()
			return // the step ended, was dead-lettered, or the run closed
		}
		stopTick()
		if ctx.Err() != nil {
			c.d.log.Warn("mcp door: a cancelled call of a named turn did not end", "agent", c.p.AgentID, "turn", c.turn, "step", c.step)
			return
		}
	}
}

// stepCancelFor bounds how long a named turn's cancelled call is
// cancelled again until its output comes.
const stepCancelFor = 30 * time.Second

// traceFromMeta continues the client's trace: W3C traceparent and
// tracestate in _meta (as MCP's OpenTelemetry convention puts them)
// become the context's remote parent, which the step's NATS headers
// carry to the workers.
func traceFromMeta(ctx context.Context, meta map[string]any) context.Context {
	carrier := propagation.MapCarrier{}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v, ok := meta[k].(string); ok && len(v) <= 512 {
			carrier[k] = v
		}
	}
	if len(carrier) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

// taskMade reports whether the tools/call of ctx was answered with a task.
func taskMade(ctx context.Context) bool {
	box, _ := ctx.Value(taskBoxKey{}).(*taskBox)
	return box != nil && box.res != nil
}

// outcome names how a tools/call ended, for metrics and spans.
func outcome(ctx context.Context, res *mcp.CallToolResult, err error) string {
	switch {
	case ctx.Err() != nil:
		return "cancelled"
	case err == nil && taskMade(ctx):
		return "task"
	case err != nil:
		return "failed"
	case len(res.InputRequests) > 0:
		return "input_required"
	case res.IsError:
		return "tool_error"
	}
	return "ok"
}

// callStep is the step of a named turn's call whose id the client chose
// (MetaCall): the step its first attempt drew, kept in the step bucket,
// else the turn's next. A retry thus publishes the same step again, which
// the stream drops as a copy (or, past its duplicate window, the worker
// answers from the call's stored output), and reads that step's events:
// the call runs once, however many replicas the attempts reach.
func (d *Door) callStep(ctx context.Context, agentID, turnID, callID string) (int64, error) {
	kv, err := d.bucket(ctx)
	if err != nil {
		return 0, err
	}
	sum := sha256.Sum256([]byte(callID))
	key := "call." + agentID + "." + turnID + "." + hex.EncodeToString(sum[:16])
	read := func() (int64, bool, error) {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, false, nil
		} else if err != nil {
			return 0, false, fmt.Errorf("call step: %w", err)
		}
		n, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil || n < 0 {
			return 0, false, fmt.Errorf("call step %s holds %q", key, e.Value())
		}
		return n, true, nil
	}
	if n, ok, err := read(); ok || err != nil {
		return n, err
	}
	step, err := d.nextStep(ctx, agentID, turnID)
	if err != nil {
		return 0, err
	}
	if _, err := kv.Create(ctx, key, []byte(strconv.FormatInt(step, 10))); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, fmt.Errorf("call step: %w", err)
		}
		// Another attempt of the same call drew its step first: that one.
		if n, ok, err := read(); ok || err != nil {
			return n, err
		}
		return 0, errors.New("call step: vanished while read")
	}
	return step, nil
}
