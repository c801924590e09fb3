package mcpdoor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A token checked once is answered from the cache until it expires: a
// flood of requests with one token costs one signature check. The
// cache is by audience too: the same token for another resource is
// checked again.
func TestJWTVerdictIsCached(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]any{{
		"kty": "EC", "crv": "P-256", "kid": "k1", "x": b64(k.X.FillBytes(make([]byte, 32))), "y": b64(k.Y.FillBytes(make([]byte, 32))),
	}}})
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := newJWTVerifier(JWTConfig{Issuer: "https://issuer.example", JWKS: path})
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.RegisteredClaims{
		Issuer: "https://issuer.example", Subject: "alice", Audience: jwt.ClaimStrings{"https://door.example/mcp"},
		ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if sub, _, err := v.verify(ctx, s, "https://door.example/mcp"); err != nil || sub != "alice" {
		t.Fatalf("first check: %q %v", sub, err)
	}
	// A check now would refuse every token: only the cache answers.
	v.cfg.Issuer = "https://another.example"
	if sub, _, err := v.verify(ctx, s, "https://door.example/mcp"); err != nil || sub != "alice" {
		t.Fatalf("the second request was checked again: %q %v", sub, err)
	}
	if _, _, err := v.verify(ctx, s, "https://other.example/mcp"); err == nil {
		t.Fatal("a token for another audience was taken from the cache")
	}
	if _, _, err := v.verify(ctx, s+"x", "https://door.example/mcp"); err == nil {
		t.Fatal("a tampered token was accepted")
	}
}
