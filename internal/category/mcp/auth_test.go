package mcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// authRig is a real worker on embedded NATS whose one MCP server, acct,
// is the oauthWorld's, with tokens per fairness key in the vault.
type authRig struct {
	t     *testing.T
	nc    *nats.Conn
	js    jetstream.JetStream
	w     *oauthWorld
	vault *tokenvault.Vault
	conn  *mcp.Connector
	cfg   mcp.Config
	guard *netguard.Guard
	// stop stops the rig's worker (it is stopped at the test's end).
	stop func()
}

// startAuthWorker starts a worker on nc whose MCP servers are cfg, with
// the vault v; the returned func stops it (once; also at the test's
// end).
func startAuthWorker(t *testing.T, nc *nats.Conn, cfg mcp.Config, v *tokenvault.Vault, guard *netguard.Guard) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m, err := mcp.NewManager(cfg, mcp.Options{Logger: testLogger(t), MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, Version: "test",
		Vault: v, Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	ecfg := engine.Config{Name: "test", Grace: 5 * time.Second, CallTimeout: 30 * time.Second,
		Topology: bus.Topology{AckWait: 2 * time.Second, MaxDeliver: 3}}
	wk, err := engine.New(ctx, nc, ecfg, turn.NewAssembler(mcp.Category(m, nil)), nil, testLogger(t))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wk.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			_ = m.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func hostPort(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func startAuthRig(t *testing.T, w *oauthWorld, oauth mcp.OAuthConfig) *authRig {
	t.Helper()
	s := natstest.Start(t)
	nc := s.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := tokenvault.ParseKeyring([]byte("k1:" + base64.StdEncoding.EncodeToString(key)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	v, err := tokenvault.Open(ctx, js, ring, tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the two test servers' ports are allowed on loopback: a
	// redirect to any other loopback address is refused by the guard.
	allow, err := netguard.ParseAllow([]string{hostPort(t, w.as.URL), hostPort(t, w.rs.URL)})
	if err != nil {
		t.Fatal(err)
	}
	guard := netguard.New(allow, nil)
	oauth.ClientID, oauth.ClientSecret = "pre", "s3cret"
	oauth.DynamicRegistration = no()
	oauth.ConnectURL = "https://console.example/connect"
	cfg := mcp.Config{Servers: map[string]mcp.ServerConfig{"acct": {URL: w.mcpURL(), Defer: no(), OAuth: &oauth}}}
	t.Cleanup(cancel)
	stop := startAuthWorker(t, nc, cfg, v, guard)
	return &authRig{t: t, nc: nc, js: js, w: w, vault: v, cfg: cfg, guard: guard, stop: stop,
		conn: &mcp.Connector{Config: cfg, Vault: v, Guard: guard, RedirectURL: "https://console.example/oauth/callback"}}
}

type outEvent struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Server string `json:"server"`
	URL    string `json:"url"`
	Status string `json:"status"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
	Item  json.RawMessage `json:"item"`
	msgID string
}

// step sends one step of agent (fairness key fair) calling acct.whoami
// and returns the events up to step.done.
func (r *authRig) step(agent, fair, turnID string, n int) []outEvent {
	r.t.Helper()
	return r.stepCall(agent, fair, turnID, n, "acct", "whoami")
}

// stepCall is step calling namespace.name.
func (r *authRig) stepCall(agent, fair, turnID string, n int, namespace, name string) []outEvent {
	r.t.Helper()
	c := protocol.Context{Kind: "text", MCPServers: []string{"acct"}, Fairness: protocol.Fairness{Key: fair}}
	body, _ := json.Marshal(map[string]any{"agent_id": agent, "turn_id": turnID, "step": n, "context": c,
		"output": []any{map[string]any{"type": "function_call", "call_id": "c1", "namespace": namespace, "name": name, "arguments": "{}"}}})
	cons, err := r.js.OrderedConsumer(context.Background(), protocol.StreamOutputs, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, turnID)}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		r.t.Fatal(err)
	}
	ch := make(chan outEvent, 16)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		var ev outEvent
		_ = json.Unmarshal(m.Data(), &ev)
		ev.msgID = m.Headers().Get(jetstream.MsgIDHeader)
		ch <- ev
	})
	if err != nil {
		r.t.Fatal(err)
	}
	defer cc.Stop()
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agent, turnID))
	m.Data = body
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turnID, int64(n)))
	if _, err := r.js.PublishMsg(context.Background(), m); err != nil {
		r.t.Fatal(err)
	}
	var evs []outEvent
	for {
		select {
		case ev := <-ch:
			evs = append(evs, ev)
			if ev.Type == protocol.EventStepDone {
				return evs
			}
		case <-time.After(60 * time.Second):
			r.t.Fatalf("no step.done for %s.%s.%d; got %+v", agent, turnID, n, evs)
		}
	}
}

func callOutput(t *testing.T, evs []outEvent) outEvent {
	t.Helper()
	for _, ev := range evs {
		if ev.Type == protocol.EventCallOutput {
			return ev
		}
	}
	t.Fatalf("no call.output in %+v", evs)
	return outEvent{}
}

func outputText(t *testing.T, ev outEvent) string {
	t.Helper()
	var it protocol.FunctionCallOutput
	if err := json.Unmarshal(ev.Item, &it); err != nil {
		t.Fatalf("item %s: %v", ev.Item, err)
	}
	return it.Output
}

// Two agents of two tenants use one OAuth server with different
// accounts: each call carries its own tenant's token (the server says
// whose came), a tenant that has not connected gets auth_required and an
// auth.required event with the connect URL before the call's output,
// connecting makes the next call work with no restart, and no token is
// ever on the wire.
func TestTwoTenantsEachSendTheirOwnToken(t *testing.T) {
	w := newOAuthWorld(t)
	r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness})
	ctx := context.Background()
	ownerA := mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "a1", "tenant-A")
	ownerB := mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "b1", "tenant-B")
	if err := r.conn.Connect(ctx, "acct", ownerA, browser("alice")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 0)); out.Status != "ok" || outputText(t, out) != "you are alice" {
		t.Fatalf("tenant A: %+v %s", out, out.Item)
	}

	// Tenant B has connected nothing.
	evs := r.step("b1", "tenant-B", "t1", 0)
	if len(evs) != 3 || evs[0].Type != protocol.EventAuthRequired || evs[1].Type != protocol.EventCallOutput {
		t.Fatalf("tenant B's events: %+v", evs)
	}
	ar, out := evs[0], evs[1]
	if ar.msgID != "b1.t1.0.c1.auth" || ar.Server != "acct" || ar.CallID != "c1" {
		t.Fatalf("auth.required %+v (msg id %q)", ar, ar.msgID)
	}
	if u, err := url.Parse(ar.URL); err != nil || u.Host != "console.example" || u.Query().Get("key") != ownerB || u.Query().Get("server") != "acct" {
		t.Fatalf("auth.required url %q", ar.URL)
	}
	if out.Status != "error" || out.Error == nil || out.Error.Kind != string(protocol.AuthRequired) || !strings.Contains(out.Error.Message, "connect an account") {
		t.Fatalf("tenant B's call.output: %+v", out)
	}

	// B connects as bob: the next call works, on the same worker.
	if err := r.conn.Connect(ctx, "acct", ownerB, browser("bob")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("b1", "tenant-B", "t1", 1)); out.Status != "ok" || outputText(t, out) != "you are bob" {
		t.Fatalf("tenant B after connecting: %+v %s", out, out.Item)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 1)); outputText(t, out) != "you are alice" {
		t.Fatalf("tenant A again: %s", out.Item)
	}
	if got := strings.Join(w.users(), ","); got != "alice,bob,alice" {
		t.Fatalf("the server saw the tokens of %s, want alice,bob,alice", got)
	}

	// Disconnecting B: its next call needs a person again; A's works.
	if err := r.conn.Disconnect(ctx, "acct", ownerB); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("b1", "tenant-B", "t1", 2)); out.Error == nil || out.Error.Kind != string(protocol.AuthRequired) {
		t.Fatalf("tenant B after disconnecting: %+v", out)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 2)); outputText(t, out) != "you are alice" {
		t.Fatalf("tenant A after B disconnected: %s", out.Item)
	}
	r.noTokenOnTheWire()
}

// noTokenOnTheWire fails when any stored message of any stream holds a
// token the authorization server issued.
func (r *authRig) noTokenOnTheWire() {
	r.t.Helper()
	ctx := context.Background()
	r.w.mu.Lock()
	var toks []string
	for tok := range r.w.tokens {
		toks = append(toks, tok)
	}
	r.w.mu.Unlock()
	if len(toks) == 0 {
		r.t.Fatal("no token was issued")
	}
	for name := range r.js.StreamNames(ctx).Name() {
		st, err := r.js.Stream(ctx, name)
		if err != nil {
			r.t.Fatal(err)
		}
		info, _ := st.Info(ctx)
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
			msg, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			for _, tok := range toks {
				if bytes.Contains(msg.Data, []byte(tok)) || strings.Contains(strings.Join(msgHeaders(msg.Header), " "), tok) {
					r.t.Fatalf("a token is in stream %s at %d (%s)", name, seq, msg.Subject)
				}
			}
		}
	}
}

func msgHeaders(h nats.Header) []string {
	var out []string
	for k, vs := range h {
		out = append(out, k)
		out = append(out, vs...)
	}
	return out
}

var _ = http.StatusOK

// A server of 2026-07-28 refuses server/discover without a token (401)
// and, before any auth, the 2025 initialize go-sdk's Connect falls back
// to (400, no MCP-Protocol-Version). The owner's catalog must say that
// an account is needed, not that the server is down (which backs off and
// keeps the step-up or the connected account from being tried).
func TestRefusedDiscoverNeedsAnAccountNotABackoff(t *testing.T) {
	w := newOAuthWorld(t)
	w.legacyInitRefused.Store(true)
	r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness})
	gw, err := gateway.New(r.nc, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tc := protocol.Context{Kind: "text", MCPServers: []string{"acct"}, Fairness: protocol.Fairness{Key: "tenant-A"}}
	reply, err := gw.Catalog(ctx, "a1", "t1", tc)
	for errors.Is(err, nats.ErrNoResponders) && ctx.Err() == nil { // the worker's service is starting
		time.Sleep(50 * time.Millisecond)
		reply, err = gw.Catalog(ctx, "a1", "t1", tc)
	}
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(reply.Notes, "\n")
	if !strings.Contains(notes, "needs a person to connect an account") || strings.Contains(notes, "unavailable") {
		t.Fatalf("catalog notes: %s", notes)
	}
	if err := r.conn.Connect(ctx, "acct", mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "a1", "tenant-A"), browser("alice")); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 0)); out.Status != "ok" || outputText(t, out) != "you are alice" {
		t.Fatalf("after connecting: %+v %s", out, out.Item)
	}
}

// A refresh names the resource the token was granted for (RFC 8707), as
// the authorization and token requests did; the refreshed token works.
func TestRefreshNamesTheResource(t *testing.T) {
	w := newOAuthWorld(t)
	r := startAuthRig(t, w, mcp.OAuthConfig{Owner: mcp.OwnerFairness})
	ctx := context.Background()
	owner := mcp.OwnerFor(r.cfg.Servers["acct"].OAuth, "a1", "tenant-A")
	if err := r.conn.Connect(ctx, "acct", owner, browser("alice")); err != nil {
		t.Fatal(err)
	}
	tok, _, err := r.vault.Get(ctx, "acct", owner)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Resource != w.mcpURL() {
		t.Fatalf("the vault's token is for resource %q, want %q", tok.Resource, w.mcpURL())
	}
	tok.Expiry = time.Now().Add(-time.Minute)
	if err := r.vault.Put(ctx, "acct", owner, tok); err != nil {
		t.Fatal(err)
	}
	if out := callOutput(t, r.step("a1", "tenant-A", "t1", 0)); out.Status != "ok" || outputText(t, out) != "you are alice" {
		t.Fatalf("after the refresh: %+v %s", out, out.Item)
	}
	w.mu.Lock()
	got := strings.Join(w.refreshes, ",")
	w.mu.Unlock()
	if got != w.mcpURL() {
		t.Fatalf("the refresh requests named the resources %q, want one naming %q", got, w.mcpURL())
	}
}
