package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentbull/toolruntime/tool"
)

// ConnectTool is the one tool a turn's catalog offers of a server that
// needs the turn's account connected before it lists any tool (no list
// of it is known): calling it shows the user where to connect.
const ConnectTool = "connect_account"

// unlistedServers are, for one turn, the servers that need the turn's
// account connected and whose tools no one ever listed: a call of any
// name in one's namespace is answered by a stand-in that ends
// auth_required (turn.Unlisted). Names outside them stay unknown.
type unlistedServers map[string]*server

func (u unlistedServers) Unlisted(_ context.Context, namespace, name string) *tool.Tool {
	s := u[namespace]
	if s == nil {
		return nil
	}
	t, err := s.standIn(name)
	if err != nil {
		return nil // a name no tool may have: unknown, as any other
	}
	return t
}

// connectTool is the server's ConnectTool, built once.
func (s *server) connectTool() (*tool.Tool, error) {
	s.connectOnce.Do(func() { s.connect, s.connectErr = s.standIn(ConnectTool) })
	return s.connect, s.connectErr
}

// standIn is the tool that answers a call of name while the server's
// tools are unknown: it runs nothing on the server (so it is read-only
// and never held for approval). Without the caller's account it ends
// auth_required with the connect link; once the server lists its tools
// to the caller, it says that they come with the next step's catalog.
func (s *server) standIn(name string) (*tool.Tool, error) {
	desc := fmt.Sprintf("The tool %s of the MCP server %s, whose tools are unknown until an account is connected.", name, s.name)
	schema := `{"type":"object"}`
	what := name
	if name == ConnectTool {
		desc = fmt.Sprintf("The MCP server %s needs a person to connect an account before its tools can be listed or used. Call this when the user needs the server: the user is shown where to connect the account, and the server's tools are offered from the next step on once it is connected.", s.name)
		schema = `{"type":"object","properties":{},"additionalProperties":false}`
		what = "its tools"
	}
	label := s.name + "." + name
	return tool.New(tool.Def[json.RawMessage]{
		Spec: tool.Spec{
			Name:                 name,
			Description:          desc,
			JSONSchema:           json.RawMessage(schema),
			Namespace:            s.name,
			NamespaceDescription: namespaceDescription(s.name, s.cfg, nil),
			ReadOnly:             true,
			Timeout:              s.cfg.timeout(name),
		},
		Activity: func(json.RawMessage) string { return "Calling " + label },
		CompletedActivity: func(_ json.RawMessage, r tool.Result) string {
			return "Called " + label
		},
		Execute: func(ctx context.Context, _ json.RawMessage) (tool.Result, error) {
			return s.callUnlisted(ctx, name, what)
		},
	})
}

func (s *server) callUnlisted(ctx context.Context, name, what string) (tool.Result, error) {
	// A session is not enough: a server may take the token and still
	// refuse the list for want of scopes (a step-up), or refuse it again
	// past max_step_ups; the list is what the next step needs.
	_, err := s.toolSet(ctx)
	switch {
	case err == nil && name == ConnectTool:
		return tool.Result{Content: fmt.Sprintf("The account for the MCP server %s is connected: its tools are offered from the next step on.", s.name)}, nil
	case err == nil:
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"The account for the MCP server %s was connected after this step's tools were listed, so %s was not run. The server's tools are offered from the next step on; call it again there if the server lists it.", s.name, name)
	case ctx.Err() != nil:
		return tool.Result{}, context.Cause(ctx)
	}
	if ae := authError(s.name, err); ae != nil {
		return tool.Result{}, ae
	}
	return tool.Result{}, tool.Errorf(tool.ToolError,
		"%v, so %s was not run. Try again later, or do without it.", noteError(s.name, err), what)
}
