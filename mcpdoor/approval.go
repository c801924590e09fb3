package mcpdoor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/protocol"
)

// approvalKey is the one input request of a held call.
const approvalKey = "approval"

// stateFor is the most a requestState lives, whatever the step's own
// expiry.
const stateFor = time.Hour

// mrtrClient reports whether the client takes a held call as an
// input_required result (2026-07-28, with elicitation) instead of a
// request that waits.
func mrtrClient(req *mcp.CallToolRequest) bool {
	if req.ProtocolVersion() < "2026-07-28" {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// argsDigest is the SHA-256 of the arguments as canonical JSON (keys
// sorted), so a retry that re-encodes the same value matches.
func argsDigest(args string) []byte {
	var v any
	b := []byte(args)
	if json.Unmarshal(b, &v) == nil {
		if c, err := json.Marshal(v); err == nil {
			b = c
		}
	}
	s := sha256.Sum256(b)
	return s[:]
}

// inputRequired asks the client to approve or refuse the held call; its
// answer comes back on a retry with the sealed state.
func (c *callRun) inputRequired(ev *protocol.StepPending, args string) *mcp.CallToolResult {
	exp := time.Now().Add(stateFor)
	if !ev.ExpiresAt.IsZero() && ev.ExpiresAt.Before(exp) {
		exp = ev.ExpiresAt
	}
	st := approvalState{V: 1, Principal: c.p.Name, Agent: c.p.AgentID, Turn: c.turn, Step: c.step, CallID: c.callID,
		Tool: c.toolName, Args: argsDigest(args), Expires: exp.Unix()}
	return &mcp.CallToolResult{
		Content:       []mcp.Content{},
		InputRequests: mcp.InputRequestMap{approvalKey: approvalForm(c.toolName, c.callID, ev)},
		RequestState:  c.d.seal.seal(st),
	}
}

// approvalForm is the one input request of a held call: a form asking
// to approve or refuse it, whose message names the tool, the call's
// activity and the policy's reason.
func approvalForm(tool, callID string, ev *protocol.StepPending) *mcp.ElicitParams {
	msg := fmt.Sprintf("%s wants to run.", tool)
	if ev != nil {
		for _, a := range ev.Approvals {
			if a.CallID == callID {
				if a.Activity != "" {
					msg = fmt.Sprintf("%s wants to run: %s.", tool, a.Activity)
				}
				if a.Reason != "" {
					msg += " Reason: " + a.Reason + "."
				}
			}
		}
	}
	msg += " Approve?"
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: msg,
		RequestedSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"approve": map[string]any{"type": "boolean", "description": "Run the call."},
				"reason":  map[string]any{"type": "string", "description": "Why (optional)."},
			},
			"required": []string{"approve"},
		},
	}
}

// decisionOf is the decision an answer to approvalForm makes: approved
// only when accepted with approve true.
func decisionOf(callID string, r *mcp.ElicitResult) protocol.Decision {
	dec := protocol.Decision{CallID: callID}
	if r.Action == "accept" {
		dec.Approved, _ = r.Content["approve"].(bool)
	}
	if s, _ := r.Content["reason"].(string); s != "" {
		dec.Reason = s
	} else if !dec.Approved {
		dec.Reason = "refused by the MCP client (" + r.Action + ")"
	}
	return dec
}

// answer is a retry carrying a requestState: it is checked against the
// principal and the call, and its decision goes to the workers. Nothing
// runs for a state that does not open, is another principal's or
// another call's. A replayed state decides nothing new (the first
// decision wins) and reads the call's outcome again.
func (d *Door) answer(ctx context.Context, p *Principal, t catalogTool, req *mcp.CallToolRequest, args string) (*callRun, error) {
	st, err := d.seal.open(req.Params.RequestState, time.Now())
	if err != nil {
		return nil, invalidParams(err)
	}
	if st.Principal != p.Name || st.Agent != p.AgentID || st.Tool != t.name || !bytes.Equal(st.Args, argsDigest(args)) {
		return nil, invalidParams(fmt.Errorf("%w: not this principal's call", errBadState))
	}
	c := &callRun{d: d, p: p, req: req, toolName: t.name, turn: st.Turn, step: st.Step, callID: st.CallID, named: true, decided: true}
	r, ok := req.Params.InputResponses[approvalKey].(*mcp.ElicitResult)
	if !ok {
		// No answer: the call still waits; ask again.
		c.decided = false
		return c, nil
	}
	dec := decisionOf(st.CallID, r)
	if err := d.gw.Decide(ctx, p.AgentID, st.Turn, st.Step, 1, []protocol.Decision{dec}); err != nil {
		return nil, fmt.Errorf("sending the decision: %w", err)
	}
	return c, nil
}
