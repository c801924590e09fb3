package mcpdoor

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		meta, err := parseCallMeta(req.Params.Meta)
		if err != nil {
			return nil, invalidParams(err)
		}
		args := string(req.Params.Arguments)
		if strings.TrimSpace(args) == "" || args == "null" {
			args = "{}"
		}
		turnID, step := meta.Turn, int64(0)
		if turnID == "" {
			turnID = randomID("mcp")
		} else if step, err = d.nextStep(ctx, p.AgentID, turnID); err != nil {
			return nil, err
		}
		callID := meta.CallID
		if callID == "" {
			callID = randomID("mcp")
		}
		item, _ := json.Marshal(functionCall{Type: "function_call", CallID: callID, Namespace: t.namespace, Name: t.call, Arguments: args})
		st := protocol.Step{AgentID: p.AgentID, TurnID: turnID, Step: step, Context: p.Context(), Output: []json.RawMessage{item}}
		run, err := d.gw.Send(ctx, st, gateway.WithActivity())
		if err != nil {
			if errors.Is(err, protocol.ErrMalformed) {
				return nil, invalidParams(err)
			}
			return nil, fmt.Errorf("publishing the call: %w", err)
		}
		defer run.Close()
		c := &callRun{d: d, p: p, req: req, turn: turnID, step: step, callID: callID, named: meta.Turn != ""}
		return c.wait(ctx, run)
	}
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

	progress float64
	total    float64
}

func (c *callRun) wait(ctx context.Context, run *gateway.StepRun) (*mcp.CallToolResult, error) {
	var deadline time.Time // set once the call is held for approval
	label := ""
	for {
		nctx, stop := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
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
			c.cancel()
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
		if c.total > c.progress {
			c.progress = c.total
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
// exactly it; a named turn's other calls must go on, so its cancel is
// the call's own.
func (c *callRun) cancel() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.named {
		c.d.log.Info("mcp door: a cancelled call of a named turn runs to its end", "agent", c.p.AgentID, "turn", c.turn, "step", c.step, "call", c.callID)
		return
	}
	if err := c.d.gw.Cancel(ctx, c.p.AgentID, c.turn, "cancelled by the MCP client"); err != nil {
		c.d.log.Warn("mcp door: cancel failed", "agent", c.p.AgentID, "turn", c.turn, "err", err)
	}
}
