package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Input requests (protocol 1.3): a 2026-07-28 server answers a call with
// an input_required result (the client's automatic retries are off:
// inputRoundTrips), and the call is held for a person through the
// approval path (turn.HoldForInput) with what resuming needs: the id of
// the server's request and its requestState, echoed back unchanged. The
// answer resumes the call on any worker: tools/call again with
// inputResponses and requestState (resumeParams).

// Bounds of what a server may ask: the message and the schema are shown
// to a person and kept in TURN_STATE.
const (
	MaxInputMessage = 4 << 10
	MaxInputSchema  = 64 << 10
)

// inputState is an MCP call's own part of its hold.
type inputState struct {
	RequestID    string `json:"request_id"`
	RequestState string `json:"request_state,omitempty"`
}

// inputRoundTrips turns the SDK's automatic input round trips off: the
// worker answers input_required results itself, through a person.
func inputRoundTrips() *sdk.MultiRoundTripOptions {
	return &sdk.MultiRoundTripOptions{Disabled: true}
}

// inputRequired holds a call whose server asked for input, or ends it
// with an error the model can act on when the request is not one a
// person can answer here.
func (s *server) inputRequired(ctx context.Context, name string, args json.RawMessage, res *sdk.CallToolResult) (tool.Result, error) {
	if len(res.InputRequests) == 0 {
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"The MCP server %s did not run %s now (it asked to be called again later). Try again later, or do without it.", s.name, name)
	}
	var id string
	var ep *sdk.ElicitParams
	for k, r := range res.InputRequests {
		p, ok := r.(*sdk.ElicitParams)
		if !ok || len(res.InputRequests) > 1 || (p.Mode != "" && p.Mode != "form") {
			return tool.Result{}, tool.Errorf(tool.ToolError,
				"The MCP server %s asked for input to run %s that this worker cannot give (one form for a person is what it answers, not %d requests, sampling, roots or a URL). Do without this tool.",
				s.name, name, len(res.InputRequests))
		}
		id, ep = k, p
	}
	if !turn.InputAllowed(ctx) {
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"The MCP server %s asked a person for input to run %s (%q), which only a main turn can ask for. Do without this tool here.",
			s.name, name, textclip.Text(ep.Message, 256))
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if ep.RequestedSchema != nil {
		b, err := json.Marshal(ep.RequestedSchema)
		if err != nil || len(b) > MaxInputSchema {
			return tool.Result{}, tool.Errorf(tool.ToolError,
				"The MCP server %s asked for input to run %s with a form this worker cannot show (its schema is unreadable or over %d bytes). Do without this tool.", s.name, name, MaxInputSchema)
		}
		schema = b
	}
	state, err := json.Marshal(inputState{RequestID: id, RequestState: res.RequestState})
	if err != nil {
		return tool.Result{}, err
	}
	return turn.HoldForInput(ctx, &turn.InputHold{
		Request:   protocol.InputRequest{Message: textclip.Text(ep.Message, MaxInputMessage), RequestedSchema: schema},
		Arguments: args,
		State:     state,
	})
}

// resumeParams adds a resumed call's answer to its tools/call: the
// person's input (with the requested schema's defaults for the fields it
// leaves out, as MCP elicitation asks of a client) or a decline, and the
// server's requestState as it sent it. A call that is not resumed is left
// as it is.
func resumeParams(ctx context.Context, params *sdk.CallToolParams) error {
	call, _ := tool.CallFrom(ctx)
	r := turn.ResumeOf(ctx, call.CallID)
	if r == nil || r.Hold == nil {
		return nil
	}
	var st inputState
	if err := json.Unmarshal(r.Hold.State, &st); err != nil {
		return fmt.Errorf("the held call's state is unreadable: %w", err)
	}
	answer := &sdk.ElicitResult{Action: "decline"}
	if r.Decision.Approved {
		content, err := withDefaults(r.Decision.Input, r.Hold.Request.RequestedSchema)
		if err != nil {
			return err
		}
		answer = &sdk.ElicitResult{Action: "accept", Content: content}
	}
	params.InputResponses = sdk.InputResponseMap{st.RequestID: answer}
	params.RequestState = st.RequestState
	return nil
}

// withDefaults decodes a person's input and fills in the defaults the
// requested schema gives for the top-level fields it leaves out (an
// elicitation form is flat).
func withDefaults(input, schema json.RawMessage) (map[string]any, error) {
	content := map[string]any{}
	if len(bytes.TrimSpace(input)) > 0 {
		if err := json.Unmarshal(input, &content); err != nil {
			return nil, fmt.Errorf("the input is not a JSON object: %w", err)
		}
	}
	var s struct {
		Properties map[string]struct {
			Default json.RawMessage `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return content, nil
	}
	for name, p := range s.Properties {
		if _, ok := content[name]; ok || len(p.Default) == 0 {
			continue
		}
		var v any
		if json.Unmarshal(p.Default, &v) == nil {
			content[name] = v
		}
	}
	return content, nil
}
