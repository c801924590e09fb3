package console_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// accounts is a real go-sdk MCP server behind auth.RequireBearerToken
// and an authorization server written for the test: metadata, authorize
// (PKCE S256, iss; the person is named by the X-Test-User header of the
// browser's request), token, and RFC 7009 revocation. The MCP server's
// tool whoami answers whose token came.
type accounts struct {
	as, rs *httptest.Server
	// refuse, when set, is the error and description the authorization
	// endpoint sends back instead of a code; browserUser is whom a
	// request without X-Test-User (a real browser's) signs in as. Both
	// are set while the servers run: under mu.
	refuse      [2]string
	browserUser string

	mu      sync.Mutex
	codes   map[string][2]string // code → user, code challenge
	tokens  map[string]string    // access or refresh token → user
	revoked []string             // users whose tokens were revoked
	seen    []string
}

func newAccounts(t *testing.T) *accounts {
	a := &accounts{codes: map[string][2]string{}, tokens: map[string]string{}}
	a.as = httptest.NewServer(http.HandlerFunc(a.serveAS))
	t.Cleanup(a.as.Close)
	srv := sdk.NewServer(&sdk.Implementation{Name: "accounts", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "whoami", Description: "Who the token belongs to."}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		user := req.Extra.TokenInfo.UserID
		a.mu.Lock()
		a.seen = append(a.seen, user)
		a.mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you are " + user}}}, nil, nil
	})
	mux := http.NewServeMux()
	a.rs = httptest.NewServer(mux)
	t.Cleanup(a.rs.Close)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		a.mu.Lock()
		user, ok := a.tokens[token]
		a.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: user, Scopes: []string{"read"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: a.rs.URL + "/.well-known/oauth-protected-resource/mcp"})(h))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: a.rs.URL + "/mcp", AuthorizationServers: []string{a.as.URL}, ScopesSupported: []string{"read"}}))
	return a
}

func (a *accounts) serveAS(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.as.URL, "authorization_endpoint": a.as.URL + "/authorize", "token_endpoint": a.as.URL + "/token",
			"revocation_endpoint": a.as.URL + "/revoke", "code_challenge_methods_supported": []string{"S256"},
			"authorization_response_iss_parameter_supported": true, "response_types_supported": []string{"code"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		})
	case "/authorize":
		q := r.URL.Query()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := back.Query()
		v.Set("state", q.Get("state"))
		a.mu.Lock()
		refuse := a.refuse
		a.mu.Unlock()
		if refuse[0] != "" {
			v.Set("error", refuse[0])
			v.Set("error_description", refuse[1])
		} else {
			if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "pre" || q.Get("resource") != a.rs.URL+"/mcp" {
				http.Error(w, "bad authorization request", http.StatusBadRequest)
				return
			}
			code := rand.Text()
			a.mu.Lock()
			user := r.Header.Get("X-Test-User")
			if user == "" {
				user = a.browserUser
			}
			a.codes[code] = [2]string{user, q.Get("code_challenge")}
			a.mu.Unlock()
			v.Set("code", code)
			v.Set("iss", a.as.URL)
		}
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	case "/token":
		if id, secret, ok := r.BasicAuth(); !ok || id != "pre" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		a.mu.Lock()
		c, ok := a.codes[r.Form.Get("code")]
		delete(a.codes, r.Form.Get("code"))
		a.mu.Unlock()
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c[1] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		tok, refresh := "tok-"+c[0]+"-"+rand.Text(), "r-"+c[0]+"-"+rand.Text()
		a.mu.Lock()
		a.tokens[tok], a.tokens[refresh] = c[0], c[0]
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh, "scope": "read"})
	case "/revoke":
		if id, secret, ok := r.BasicAuth(); !ok || id != "pre" || secret != "s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		a.mu.Lock()
		if user, ok := a.tokens[r.Form.Get("token")]; ok {
			delete(a.tokens, r.Form.Get("token"))
			a.revoked = append(a.revoked, user)
		}
		a.mu.Unlock()
	default:
		http.NotFound(w, r)
	}
}

func (a *accounts) users() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.seen, ",")
}

// connectRig is a worker whose MCP server acct is the accounts' (tokens
// per fairness key), and a console whose connect page connects it.
type connectRig struct {
	a   *accounts
	gw  *gateway.Client
	url string
}

func startConnectRig(t *testing.T) *connectRig {
	t.Helper()
	a := newAccounts(t)
	srv := natstest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := tokenvault.ParseKeyring([]byte("k1:" + base64.StdEncoding.EncodeToString(key)))
	if err != nil {
		t.Fatal(err)
	}
	hp := func(raw string) string { u, _ := url.Parse(raw); return u.Host }
	allow, err := netguard.ParseAllow([]string{hp(a.as.URL), hp(a.rs.URL)})
	if err != nil {
		t.Fatal(err)
	}
	guard := netguard.New(allow, nil)
	// The console's address comes before its config: the redirect URL
	// is its callback.
	h := &handlerSwitch{}
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	no := false
	cfg := mcp.Config{Servers: map[string]mcp.ServerConfig{"acct": {URL: a.rs.URL + "/mcp", Defer: &no, OAuth: &mcp.OAuthConfig{
		ClientID: "pre", ClientSecret: "s3cret", DynamicRegistration: &no, ConnectURL: hs.URL + "/connect"}}}}

	workertest.RunWorkerWith(t, srv, workertest.Config("w1"), func(js jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		v, err := tokenvault.Open(ctx, js, ring, tokenvault.Options{})
		if err != nil {
			t.Fatal(err)
		}
		m, err := mcp.NewManager(cfg, mcp.Options{Logger: workertest.Logger(), Version: "test", Vault: v, Guard: guard})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		return []tool.Category{mcp.Category(m, nil)}, nil
	})

	cnc := srv.Connect(t)
	cjs, err := jetstream.New(cnc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cv, err := tokenvault.Open(ctx, cjs, ring, tokenvault.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{NC: cnc, Token: testToken, Logger: workertest.Logger(),
		Connector: &mcp.Connector{Config: cfg, Vault: cv, Guard: guard, RedirectURL: hs.URL + "/connect/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.set(c)
	gw, err := gateway.New(srv.Connect(t), gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return &connectRig{a: a, gw: gw, url: hs.URL}
}

// handlerSwitch serves the console once it is built.
type handlerSwitch struct {
	mu sync.Mutex
	h  http.Handler
}

func (s *handlerSwitch) set(h http.Handler) { s.mu.Lock(); s.h = h; s.mu.Unlock() }
func (s *handlerSwitch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.h
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// call sends step n of agent's turn t1 (fairness key tenant) calling
// acct.whoami and returns its call output and the auth.required event,
// if one came.
func (r *connectRig) call(t *testing.T, agent, tenant string, n int64) (*protocol.CallOutput, *protocol.AuthRequiredEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	item, _ := json.Marshal(map[string]any{"type": "function_call", "call_id": "c1", "namespace": "acct", "name": "whoami", "arguments": "{}"})
	run, err := r.gw.Send(ctx, protocol.Step{AgentID: agent, TurnID: "t1", Step: n,
		Context: protocol.Context{Kind: "text", MCPServers: []string{"acct"}, Fairness: protocol.Fairness{Key: tenant}},
		Output:  []json.RawMessage{item}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	var out *protocol.CallOutput
	var ar *protocol.AuthRequiredEvent
	for {
		ev, err := run.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch ev := ev.(type) {
		case *protocol.CallOutput:
			out = ev
		case *protocol.AuthRequiredEvent:
			ar = ev
		case *protocol.StepDone:
			if out == nil {
				t.Fatal("step.done without a call.output")
			}
			return out, ar
		}
	}
}

// browserClient is a person's browser on the console: its session, and
// the X-Test-User header on its requests to the authorization server
// (whom the person signs in as).
func (r *connectRig) browserClient(t *testing.T, user, key string) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect, Transport: userTransport{user: user, as: r.a.as.URL}}
	resp, err := c.PostForm(r.url+"/login", url.Values{"token": {testToken}, "name": {"Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	body := get(t, c, r.url+"/connect?key="+key, http.StatusOK)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on the connect page: %s", body)
	}
	return c, m[1]
}

type userTransport struct{ user, as string }

func (u userTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.String(), u.as) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Test-User", u.user)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connect clicks Connect on the page and follows the person's way: the
// link to the authorization server, its redirect to the callback. It
// returns the callback page and its status.
func (r *connectRig) connect(t *testing.T, c *http.Client, csrf, key string) (string, int) {
	t.Helper()
	resp, err := c.PostForm(r.url+"/connect/start", url.Values{"csrf": {csrf}, "server": {"acct"}, "key": {key}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /connect/start: %s: %s", resp.Status, body)
	}
	m := regexp.MustCompile(`id="authorize" href="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no authorization link on the page: %s", body)
	}
	authURL := html.UnescapeString(string(m[1]))
	if !strings.HasPrefix(authURL, r.a.as.URL+"/authorize?") {
		t.Fatalf("the link goes to %s", authURL)
	}
	resp, err = c.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(back, r.url+"/connect/callback?") {
		t.Fatalf("the authorization server answered %s to %q", resp.Status, back)
	}
	// The redirect from another site brings no session cookie
	// (SameSite=Strict): the callback must not need one.
	resp, err = http.Get(back)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode
}

// A person connects a tenant's account on the console: before, the
// worker's call ends auth_required with an auth.required event linking
// to the console's page; the page shows the server not connected;
// Connect hands the person to the authorization server, whose redirect
// lands on the console's callback; then the worker's next call carries
// the tenant's token, with no restart. Disconnect revokes the token at
// the authorization server (RFC 7009) and deletes it: the next call
// needs a person again.
func TestConnectPageConnectsAnAccount(t *testing.T) {
	r := startConnectRig(t)
	// Tenant B connects first (as bob) and its agent lists the server.
	cb, csrfB := r.browserClient(t, "bob", "fair:tenant-B")
	if done, status := r.connect(t, cb, csrfB, "fair:tenant-B"); status != http.StatusOK || !strings.Contains(done, `id="connected"`) {
		t.Fatalf("tenant B's callback: %d %s", status, done)
	}
	if out, _ := r.call(t, "b1", "tenant-B", 0); out.Status != protocol.StatusOK {
		t.Fatalf("tenant B: %+v", out)
	}

	// Tenant A has connected nothing.
	out, ar := r.call(t, "a1", "tenant-A", 0)
	if out.Error == nil || out.Error.Kind != protocol.AuthRequired || ar == nil {
		t.Fatalf("before connecting: %+v, auth.required %+v", out, ar)
	}
	link, err := url.Parse(ar.URL)
	if err != nil || !strings.HasPrefix(ar.URL, r.url+"/connect?") || link.Query().Get("key") != "fair:tenant-A" {
		t.Fatalf("auth.required url %q", ar.URL)
	}

	c, csrf := r.browserClient(t, "alice", "fair:tenant-A")
	page := get(t, c, ar.URL, http.StatusOK)
	if !strings.Contains(page, "not connected") {
		t.Fatalf("the connect page does not say acct is not connected: %s", page)
	}
	// An action without the session's CSRF token is refused.
	resp, err := c.PostForm(r.url+"/connect/start", url.Values{"server": {"acct"}, "key": {"fair:tenant-A"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("connect without CSRF: %s", resp.Status)
	}

	done, status := r.connect(t, c, csrf, "fair:tenant-A")
	if status != http.StatusOK || !strings.Contains(done, `id="connected"`) {
		t.Fatalf("callback: %d %s", status, done)
	}
	if page := get(t, c, ar.URL, http.StatusOK); !strings.Contains(page, `connected, scopes <span class="vis">read</span>`) || !strings.Contains(page, "Disconnect") {
		t.Fatalf("the connect page after connecting: %s", page)
	}
	out, ar = r.call(t, "a1", "tenant-A", 1)
	if out.Status != protocol.StatusOK || ar != nil {
		t.Fatalf("after connecting: %+v %+v", out, ar)
	}
	if out, _ := r.call(t, "b1", "tenant-B", 1); out.Status != protocol.StatusOK {
		t.Fatalf("tenant B again: %+v", out)
	}
	if got := r.a.users(); got != "bob,alice,bob" {
		t.Fatalf("the server saw the tokens of %q, want bob,alice,bob", got)
	}

	// A callback replayed (its state is used once) connects nothing.
	resp, err = http.Get(r.url + "/connect/callback?state=nope&code=x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a callback of no flow: %s", resp.Status)
	}

	if code := postStatus(t, c, r.url+"/connect/disconnect", url.Values{"csrf": {csrf}, "server": {"acct"}, "key": {"fair:tenant-A"}}); code != http.StatusSeeOther {
		t.Fatalf("disconnect: %d", code)
	}
	r.a.mu.Lock()
	revoked := strings.Join(r.a.revoked, ",")
	r.a.mu.Unlock()
	if revoked != "alice,alice" { // the refresh token, then the access token
		t.Fatalf("revoked at the authorization server: %q", revoked)
	}
	if page := get(t, c, ar2(r.url), http.StatusOK); !strings.Contains(page, "not connected") || !strings.Contains(page, "Disconnected acct") {
		t.Fatalf("the connect page after disconnecting: %s", page)
	}
	if out, ar := r.call(t, "a1", "tenant-A", 2); out.Error == nil || out.Error.Kind != protocol.AuthRequired || ar == nil {
		t.Fatalf("after disconnecting: %+v", out)
	}
}

func ar2(base string) string { return base + "/connect?key=fair:tenant-A" }

func postStatus(t *testing.T, c *http.Client, u string, v url.Values) int {
	t.Helper()
	resp, err := c.PostForm(u, v)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// What the authorization server sends back (an error description) is
// hostile: the callback page shows it escaped, its hidden characters as
// markers, and connects nothing.
func TestConnectCallbackShowsHostileErrorsEscaped(t *testing.T) {
	r := startConnectRig(t)
	r.a.mu.Lock()
	r.a.refuse = [2]string{"access_denied", `<script>alert(1)</script><img src=x onerror=alert(2)>` + "\u202e" + `evil`}
	r.a.mu.Unlock()
	c, csrf := r.browserClient(t, "mallory", "fair:tenant-A")
	done, status := r.connect(t, c, csrf, "fair:tenant-A")
	if status != http.StatusBadGateway || !strings.Contains(done, `id="failed"`) {
		t.Fatalf("callback: %d %s", status, done)
	}
	for _, bad := range []string{"<script>", "<img", "\u202e"} {
		if strings.Contains(done, bad) {
			t.Fatalf("the callback page holds %q unescaped: %s", bad, done)
		}
	}
	if !strings.Contains(done, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(html.UnescapeString(done), "U+202E RIGHT-TO-LEFT OVERRIDE") || !strings.Contains(done, "access_denied") {
		t.Fatalf("the callback page does not show the refusal: %s", done)
	}
	if page := get(t, c, ar2(r.url), http.StatusOK); !strings.Contains(page, "not connected") {
		t.Fatalf("after a refusal: %s", page)
	}
}
