package mcp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// oauthWorld is a real go-sdk MCP server behind auth.RequireBearerToken
// and a small authorization server of its own (metadata, authorize with
// PKCE S256 and iss, token with refresh), written for the tests. The
// "person" who authorizes is named by the X-Test-User header of the
// authorization request. The MCP server's tool whoami answers the user
// whose token came, and the server records every token it was sent.
type oauthWorld struct {
	as, rs *httptest.Server
	// tokenHandler, when set, answers the token endpoint instead (a
	// hostile one).
	tokenHandler http.HandlerFunc

	mu     sync.Mutex
	codes  map[string]authCode
	tokens map[string]string // access token → user
	seen   []string          // the users of the tool's calls, in order
	grants int               // authorization codes issued
	// refreshes are the resource parameters of the refresh requests.
	refreshes []string
	refresh   map[string]string // refresh token → user

	// legacyInitRefused has the MCP endpoint refuse an initialize
	// without MCP-Protocol-Version before auth, as a server of
	// 2026-07-28 only may (the conformance suite's do).
	legacyInitRefused atomic.Bool
}

type authCode struct {
	user, challenge, resource, redirect string
}

func newOAuthWorld(t *testing.T) *oauthWorld {
	w := &oauthWorld{codes: map[string]authCode{}, tokens: map[string]string{}, refresh: map[string]string{}}
	w.as = httptest.NewServer(http.HandlerFunc(w.serveAS))
	t.Cleanup(w.as.Close)
	srv := sdk.NewServer(&sdk.Implementation{Name: "accounts", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "whoami", Description: "Who the token belongs to."}, func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		user := req.Extra.TokenInfo.UserID
		w.mu.Lock()
		w.seen = append(w.seen, user)
		w.mu.Unlock()
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "you are " + user}}}, nil, nil
	})
	mux := http.NewServeMux()
	w.rs = httptest.NewServer(mux)
	t.Cleanup(w.rs.Close)
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		w.mu.Lock()
		user, ok := w.tokens[token]
		w.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("%w: unknown token", auth.ErrInvalidToken)
		}
		return &auth.TokenInfo{UserID: user, Scopes: []string{"read"}, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	guarded := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: w.rs.URL + "/.well-known/oauth-protected-resource/mcp"})(h)
	mux.HandleFunc("/mcp", func(rw http.ResponseWriter, r *http.Request) {
		if w.legacyInitRefused.Load() && r.Method == http.MethodPost && r.Header.Get("Mcp-Protocol-Version") == "" {
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"method":"initialize"`)) {
				rw.Header().Set("Content-Type", "application/json")
				rw.WriteHeader(http.StatusBadRequest)
				_, _ = rw.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"Missing MCP-Protocol-Version header"}}`))
				return
			}
		}
		guarded.ServeHTTP(rw, r)
	})
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: w.rs.URL + "/mcp", AuthorizationServers: []string{w.as.URL}, ScopesSupported: []string{"read"}}))
	return w
}

func (w *oauthWorld) mcpURL() string { return w.rs.URL + "/mcp" }

func (w *oauthWorld) serveAS(rw http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{
			"issuer": w.as.URL, "authorization_endpoint": w.as.URL + "/authorize", "token_endpoint": w.as.URL + "/token",
			"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true,
			"response_types_supported": []string{"code"}, "scopes_supported": []string{"read"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		})
	case "/authorize":
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "pre" || q.Get("resource") == "" {
			http.Error(rw, "bad authorization request", http.StatusBadRequest)
			return
		}
		code := rand.Text()
		w.mu.Lock()
		w.codes[code] = authCode{user: r.Header.Get("X-Test-User"), challenge: q.Get("code_challenge"), resource: q.Get("resource"), redirect: q.Get("redirect_uri")}
		w.grants++
		w.mu.Unlock()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := back.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		v.Set("iss", w.as.URL)
		back.RawQuery = v.Encode()
		http.Redirect(rw, r, back.String(), http.StatusFound)
	case "/token":
		if w.tokenHandler != nil {
			w.tokenHandler(rw, r)
			return
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != "pre" || secret != "s3cret" {
			http.Error(rw, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		_ = r.ParseForm()
		if r.Form.Get("grant_type") == "refresh_token" {
			w.mu.Lock()
			user, ok := w.refresh[r.Form.Get("refresh_token")]
			w.refreshes = append(w.refreshes, r.Form.Get("resource"))
			tok := "tok-" + user + "-" + rand.Text()
			if ok {
				w.tokens[tok] = user
			}
			w.mu.Unlock()
			rw.Header().Set("Content-Type", "application/json")
			if !ok {
				rw.WriteHeader(http.StatusBadRequest)
				_, _ = rw.Write([]byte(`{"error":"invalid_grant"}`))
				return
			}
			_ = json.NewEncoder(rw).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600})
			return
		}
		w.mu.Lock()
		c, ok := w.codes[r.Form.Get("code")]
		delete(w.codes, r.Form.Get("code"))
		w.mu.Unlock()
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.Form.Get("resource") != c.resource {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusBadRequest)
			_, _ = rw.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		tok, refresh := "tok-"+c.user+"-"+rand.Text(), "r-"+rand.Text()
		w.mu.Lock()
		w.tokens[tok] = c.user
		w.refresh[refresh] = c.user
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(rw).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "refresh_token": refresh, "scope": "read"})
	default:
		http.NotFound(rw, r)
	}
}

// browser is a person's browser that authorizes as user: it opens the
// authorization URL and reads the code, state and iss from the redirect,
// without following it.
func browser(user string) func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, args.URL, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("X-Test-User", user)
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_ = resp.Body.Close()
		loc, err := url.Parse(resp.Header.Get("Location"))
		if err != nil || resp.StatusCode != http.StatusFound {
			return nil, errors.New("no redirect from the authorization endpoint")
		}
		q := loc.Query()
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

func (w *oauthWorld) users() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.seen...)
}
