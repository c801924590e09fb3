package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

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
		if content == nil { // null: no input
			content = map[string]any{}
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

// An elicitation of 2025-11-25 is a request the server sends inside a
// running call, and waits on: it cannot outlive the call's connection.
// The worker running the call holds the step with the call's entry
// (turn.AskLive), and answers the elicitation when a decision arrives,
// within the call's time limit; if the worker dies meanwhile, the
// request is lost with the connection and the step's redelivery answers
// the call interrupted. The request names no call: it goes to the one
// call of its server running on this worker that may ask a person, and
// is declined when there is none or more than one.

// liveCalls are a server's running calls that may be held for input.
type liveCalls struct {
	mu    sync.Mutex
	calls map[*liveCall]bool
}

type liveCall struct {
	ctx  context.Context
	args json.RawMessage
}

// add registers a running call for its server's elicitations; the
// returned func removes it.
func (l *liveCalls) add(ctx context.Context, args json.RawMessage) func() {
	if !turn.InputAllowed(ctx) {
		return func() {}
	}
	c := &liveCall{ctx: ctx, args: args}
	l.mu.Lock()
	if l.calls == nil {
		l.calls = map[*liveCall]bool{}
	}
	l.calls[c] = true
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.calls, c)
		l.mu.Unlock()
	}
}

// only is the one registered call, or nil.
func (l *liveCalls) only() *liveCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) != 1 {
		return nil
	}
	for c := range l.calls {
		return c
	}
	return nil
}

// elicit answers a server's elicitation/create through a person (the
// SDK checks the form and fills in its defaults): accept with the
// decision's input, decline on a refusal, cancel when no answer came.
func (s *server) elicit(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	c := s.asking.only()
	if c == nil || req.Params == nil {
		s.log.Warn("mcp elicitation declined: no single running call of this server may ask a person")
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if req.Params.RequestedSchema != nil {
		b, err := json.Marshal(req.Params.RequestedSchema)
		if err != nil || len(b) > MaxInputSchema {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		schema = b
	}
	d, err := turn.AskLive(c.ctx, protocol.InputRequest{Message: textclip.Text(req.Params.Message, MaxInputMessage), RequestedSchema: schema}, c.args)
	switch {
	case errors.Is(err, turn.ErrNoAnswer):
		s.log.Info("mcp elicitation ended without an answer", "err", err)
		return &sdk.ElicitResult{Action: "cancel"}, nil
	case err != nil:
		return nil, err
	case !d.Approved:
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	content := map[string]any{}
	if len(d.Input) > 0 {
		if err := json.Unmarshal(d.Input, &content); err != nil {
			return nil, fmt.Errorf("the input is not a JSON object: %w", err)
		}
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, nil
}
