// Command mcp-conformance-client is the client the MCP conformance suite
// starts (conformance client --command …) to test the worker's MCP client
// through its real path: it starts an embedded NATS server and a worker
// in-process, with the suite's server URL (its last argument) as the MCP
// server "conf", and drives steps that call the scenario's tool over NATS
// with the gateway client. When a call ends auth_required, it connects
// the account as the console's callback would (mcp.Connector: the
// authorization URL fetched without following redirects, the code, state
// and iss read from its Location) and sends the call again as the next
// step, at most three times. It exits 0 once the call succeeds.
//
// Environment: MCP_CONFORMANCE_SCENARIO names the scenario;
// MCP_CONFORMANCE_CONTEXT, a JSON object, may carry client_id and
// client_secret (pre-registration).
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

const (
	agentID  = "conformance"
	server   = "conf"
	redirect = "http://localhost:3000/callback"
	// cimdURL is the client metadata document the suite's authorization
	// server accepts.
	cimdURL = "https://conformance-test.local/client-metadata.json"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-conformance-client:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) < 2 {
		return errors.New("usage: mcp-conformance-client <server URL>")
	}
	target := os.Args[len(os.Args)-1]
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	var sctx map[string]any
	if raw := os.Getenv("MCP_CONFORMANCE_CONTEXT"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &sctx); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	level := slog.LevelWarn
	if os.Getenv("MCP_CONFORMANCE_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()

	dir, err := os.MkdirTemp("", "mcp-conformance-client-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{Port: -1, NoMonitoring: true, StoreDir: dir})
	if err != nil {
		return err
	}
	defer ns.Shutdown()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := tokenvault.ParseKeyring([]byte("k1:" + base64.StdEncoding.EncodeToString(key)))
	if err != nil {
		return err
	}
	vault, err := tokenvault.Open(ctx, js, ring, tokenvault.Options{})
	if err != nil {
		return err
	}
	sc := mcp.ServerConfig{URL: target, Defer: new(false), ConnectTimeout: mcp.Duration(20 * time.Second)}
	authScenario := strings.HasPrefix(scenario, "auth/")
	if authScenario {
		o := &mcp.OAuthConfig{AllowPrivate: true, ClientMetadataURL: cimdURL, ConnectURL: "http://localhost/connect"}
		if id, ok := sctx["client_id"].(string); ok {
			o.ClientID = id
			o.ClientSecret, _ = sctx["client_secret"].(string)
		}
		sc.OAuth = o
	}
	cfg := mcp.Config{Servers: map[string]mcp.ServerConfig{server: sc}}
	m, err := mcp.NewManager(cfg, mcp.Options{Logger: log, Version: "conformance", Vault: vault})
	if err != nil {
		return err
	}
	defer m.Close()
	wctx, stop := context.WithCancel(context.Background())
	w, err := engine.New(wctx, nc, engine.Config{Name: "conformance", Grace: 2 * time.Second, CallTimeout: 30 * time.Second},
		turn.NewAssembler(mcp.Category(m, nil)), nil, log)
	if err != nil {
		stop()
		return err
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() { stop(); <-done }()

	gw, err := gateway.New(nc, gateway.Options{RequestTimeout: 30 * time.Second})
	if err != nil {
		return err
	}
	d := &driver{sctx: sctx, gw: gw, conn: &mcp.Connector{Config: cfg, Vault: vault, RedirectURL: redirect},
		owner: mcp.OwnerFor(sc.OAuth, agentID, ""), tc: protocol.Context{Kind: "text", MCPServers: []string{server}}}
	return d.scenario(ctx, scenario)
}

type driver struct {
	sctx  map[string]any
	gw    *gateway.Client
	conn  *mcp.Connector
	owner string
	tc    protocol.Context
	step  int64
}

// scenario drives one scenario: the tools it calls, in order.
func (d *driver) scenario(ctx context.Context, name string) error {
	switch {
	case name == "initialize":
		_, err := d.catalog(ctx)
		return err
	case name == "tools_call":
		return d.call(ctx, "add_numbers", `{"a":5,"b":3}`)
	case name == "sse-retry":
		return d.call(ctx, "test_reconnection", `{}`)
	case strings.HasPrefix(name, "elicitation-sep1034"):
		return d.call(ctx, "test_client_elicitation_defaults", `{}`)
	case strings.HasPrefix(name, "auth/"):
		return d.call(ctx, "test-tool", `{}`)
	}
	// The scenario names the calls to make (http-custom-headers).
	if calls, ok := d.sctx["toolCalls"].([]any); ok {
		for _, c := range calls {
			c, _ := c.(map[string]any)
			name, _ := c["name"].(string)
			// A null stands for a field left out: the worker checks
			// arguments against the tool's schema, where null is no
			// boolean, and a model leaves an optional field out.
			in, _ := c["arguments"].(map[string]any)
			for k, v := range in {
				if v == nil {
					delete(in, k)
				}
			}
			args, _ := json.Marshal(in)
			if err := d.call(ctx, name, string(args)); err != nil {
				return err
			}
		}
		return nil
	}
	// Any other scenario: call every tool the server lists, once, with
	// arguments made from its schema.
	reply, err := d.catalog(ctx)
	if err != nil {
		return err
	}
	tools := listed(reply.Tools)
	for _, t := range tools {
		if t.Name == "json_schema_echo" {
			// json-schema-2020-12-preservation: the schema the model is
			// shown of the scenario's other tool, echoed back (that
			// tool is not called: the echo is what is checked).
			for _, o := range tools {
				if o.Name == "json_schema_2020_12_tool" {
					b, _ := json.Marshal(map[string]json.RawMessage{"schema": o.Parameters})
					return d.call(ctx, t.Name, string(b))
				}
			}
		}
	}
	for _, t := range tools {
		if err := d.call(ctx, t.Name, argsFor(t.Parameters)); err != nil {
			return err
		}
	}
	return nil
}

// listedTool is one function of a catalog.
type listedTool struct {
	Name       string          `json:"name"`
	Parameters json.RawMessage `json:"parameters"`
	Tools      []listedTool    `json:"tools"`
}

// listed reads the functions of the server's namespace in a catalog.
func listed(raw json.RawMessage) []listedTool {
	var entries []listedTool
	_ = json.Unmarshal(raw, &entries)
	var out []listedTool
	for _, e := range entries {
		for _, t := range append([]listedTool{e}, e.Tools...) {
			if t.Name == "" || len(t.Tools) > 0 || t.Name == server {
				continue
			}
			out = append(out, t)
		}
	}
	return out
}

// argsFor makes arguments valid against a flat object schema: a value of
// each required property's type (a model would write real ones).
func argsFor(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, name := range s.Required {
		t, _ := s.Properties[name].Type.(string)
		switch t {
		case "integer", "number":
			args[name] = 1
		case "boolean":
			args[name] = true
		case "object":
			args[name] = map[string]any{}
		case "array":
			args[name] = []any{}
		default:
			args[name] = "x"
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

func (d *driver) catalog(ctx context.Context) (*protocol.CatalogReply, error) {
	for {
		reply, err := d.gw.Catalog(ctx, agentID, "t1", d.tc)
		if errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond) // the worker's service is starting
			continue
		}
		return reply, err
	}
}

// call sends steps calling the server's tool until it succeeds, connecting
// the account when it needs one (at most three times).
func (d *driver) call(ctx context.Context, tool, args string) error {
	connects := 0
	for {
		out, err := d.send(ctx, tool, args)
		if err != nil {
			return err
		}
		if out.Status == protocol.StatusOK {
			return nil
		}
		kind := out.Error.Kind
		// A server never listed for this owner answers a call of any of
		// its names with auth_required too.
		needsAuth := kind == protocol.AuthRequired
		if !needsAuth || connects >= 3 {
			return fmt.Errorf("%s: %s: %s", tool, kind, out.Error.Message)
		}
		connects++
		if err := d.conn.Connect(ctx, server, d.owner, fetchCode); err != nil {
			return err
		}
	}
}

func (d *driver) send(ctx context.Context, tool, args string) (*protocol.CallOutput, error) {
	item, _ := json.Marshal(map[string]any{"type": "function_call", "call_id": "c1", "namespace": server, "name": tool, "arguments": args})
	n := d.step
	d.step++
	run, err := d.gw.Send(ctx, protocol.Step{AgentID: agentID, TurnID: "t1", Step: n, Context: d.tc, Output: []json.RawMessage{item}})
	if err != nil {
		return nil, err
	}
	defer run.Close()
	var out *protocol.CallOutput
	round := 0
	for {
		ev, err := run.Next(ctx)
		if err != nil {
			return nil, err
		}
		switch ev := ev.(type) {
		case *protocol.StepPending:
			// The person: a server's input request is accepted with
			// every field left out (the worker fills in the schema's
			// defaults, SEP-1034); a held call is approved.
			round++
			var ds []protocol.Decision
			for _, p := range ev.Approvals {
				dec := protocol.Decision{CallID: p.CallID, Approved: true}
				if p.InputRequest != nil {
					dec.Input = json.RawMessage(`{}`)
				}
				ds = append(ds, dec)
			}
			if err := d.gw.Decide(ctx, agentID, "t1", n, round, ds); err != nil {
				return nil, err
			}
		case *protocol.CallOutput:
			out = ev
		case *protocol.StepDone:
			if out == nil {
				return nil, errors.New("step.done without a call.output")
			}
			return out, nil
		}
	}
}

// fetchCode is the person's browser in the suite: its authorization
// server redirects at once; the redirect is read, not followed.
func fetchCode(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		return nil, fmt.Errorf("authorization redirect: %w", err)
	}
	q := loc.Query()
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
