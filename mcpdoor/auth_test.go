package mcpdoor_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/mcpdoor"
)

func hash(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// bearer adds a token to every request of a client.
type bearer struct {
	tok string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

func principals(t *testing.T, js string) *mcpdoor.Principals {
	t.Helper()
	ps, err := mcpdoor.ParsePrincipals([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// mcpPost is a POST of body to url as an MCP client of version sends it:
// JSON, accepting JSON and an event stream, with the token if any.
func mcpPost(url, token, version, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

func post(t *testing.T, url, token, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req := mcpPost(url, token, "2025-11-25", body)
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

func TestBearerTokens(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	ps := principals(t, fmt.Sprintf(`{"principals":[
		{"name":"alice","token_sha256":[%q],"agent_id":"agent-alice","fairness":{"key":"tenant-a","weight":2}},
		{"name":"bob","token_sha256":[%q],"agent_id":"agent-bob"}]}`, hash("alice-secret-token"), hash("bob-secret-token")))
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps})

	resp, _ := post(t, door.URL+mcpdoor.Path, "", listBody, nil)
	want := fmt.Sprintf(`Bearer resource_metadata=%q`, door.URL+"/.well-known/oauth-protected-resource/mcp")
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	if resp, _ := post(t, door.URL+mcpdoor.Path, "mallory-guess", listBody, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d", resp.StatusCode)
	}
	mresp, err := http.Get(door.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	_ = json.NewDecoder(mresp.Body).Decode(&md)
	mresp.Body.Close()
	if md["resource"] != door.URL+mcpdoor.Path {
		t.Fatalf("protected resource metadata %v", md)
	}

	// Each token is its principal's agent, whatever the client names.
	for _, c := range []struct{ tok, agent string }{{"alice-secret-token", "agent-alice"}, {"bob-secret-token", "agent-bob"}} {
		cs := connect(t, door.URL, &http.Client{Transport: bearer{c.tok}})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "where", Arguments: map[string]any{},
			Meta: mcp.Meta{mcpdoor.MetaTurn: "shared-name", "agent_id": "agent-alice"}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		sc, _ := res.StructuredContent.(map[string]any)
		if sc["agent"] != c.agent || sc["turn"] != "shared-name" {
			t.Fatalf("%s: %v", c.tok, sc)
		}
	}
}

func TestJWT(t *testing.T) {
	t.Parallel()
	s, _ := fleet(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	jwksFile := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwksFile, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	ps := principals(t, `{"principals":[{"name":"carol","jwt_sub":"user-carol","agent_id":"agent-carol"}]}`)
	const resource = "https://door.example/mcp"
	door := serveDoor(t, s, mcpdoor.Config{Principals: ps, Resource: resource,
		JWT: &mcpdoor.JWTConfig{Issuer: "https://issuer.example", JWKS: jwksFile}})
	sign := func(claims jwt.MapClaims, k *rsa.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := jwt.MapClaims{"iss": "https://issuer.example", "sub": "user-carol", "aud": resource, "exp": time.Now().Add(time.Hour).Unix()}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for a, b := range good {
			c[a] = b
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, c := range []struct {
		name   string
		token  string
		status int
	}{
		{"good", sign(good, key), http.StatusOK},
		{"other audience", sign(with("aud", "https://elsewhere.example/mcp"), key), http.StatusUnauthorized},
		{"other issuer", sign(with("iss", "https://evil.example"), key), http.StatusUnauthorized},
		{"expired", sign(with("exp", time.Now().Add(-time.Hour).Unix()), key), http.StatusUnauthorized},
		{"no expiry", sign(with("exp", nil), key), http.StatusUnauthorized},
		{"unknown subject", sign(with("sub", "user-dave"), key), http.StatusUnauthorized},
		{"other key", sign(good, other), http.StatusUnauthorized},
	} {
		resp, body := post(t, door.URL+mcpdoor.Path, c.token, listBody, nil)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d (%s)", c.name, resp.StatusCode, c.status, body)
		}
		if c.status == http.StatusOK && !strings.Contains(body, `"name":"echo"`) {
			t.Errorf("%s: %s", c.name, body)
		}
	}
}
