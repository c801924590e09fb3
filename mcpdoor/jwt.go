package mcpdoor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// JWTConfig accepts JWT access tokens of one issuer (RFC 9068): signed
// by a key of its JWKS, with iss, exp and an aud naming the door's
// resource (RFC 8707) checked.
type JWTConfig struct {
	Issuer string
	// Audience is what aud must hold; empty: the door's resource URL.
	Audience string
	// JWKS is an https:// (or http://) URL or a file path.
	JWKS string
	// HTTPClient fetches a JWKS URL (default: 10 s timeout).
	HTTPClient *http.Client
}

type jwtVerifier struct {
	cfg     JWTConfig
	client  *http.Client
	mu      sync.Mutex
	keys    map[string]any
	fetched time.Time

	// verified caches checks by the token's SHA-256 and audience, so
	// that a client's requests with one token cost one signature check
	// (a flood of them, a map lookup each) until the token expires.
	cacheMu  sync.Mutex
	verified map[jwtCacheKey]jwtVerdict
}

type jwtCacheKey struct {
	token [sha256.Size]byte
	aud   string
}

type jwtVerdict struct {
	sub   string
	exp   time.Time
	until time.Time // the verdict is reused until then
	err   error
}

// jwtCacheMax bounds the verified cache; past it the cache starts over.
// jwtRefusedFor is how long a refused token stays refused without a new
// check.
const (
	jwtCacheMax   = 4096
	jwtRefusedFor = 10 * time.Second
)

func newJWTVerifier(cfg JWTConfig) (*jwtVerifier, error) {
	if cfg.Issuer == "" || cfg.JWKS == "" {
		return nil, errors.New("mcpdoor: JWT needs Issuer and JWKS")
	}
	v := &jwtVerifier{cfg: cfg, client: cfg.HTTPClient}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	return v, nil
}

// MaxJWKSBytes bounds a JWKS document.
const MaxJWKSBytes = 1 << 20

// key finds a signing key by kid, fetching the JWKS again (at most every
// 30 s) when it does not know it.
func (v *jwtVerifier) key(ctx context.Context, kid string) (any, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[kid]; ok {
		return k, nil
	}
	if time.Since(v.fetched) < 30*time.Second && v.keys != nil {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	b, err := v.load(ctx)
	v.fetched = time.Now()
	if err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	keys, err := parseJWKS(b)
	if err != nil {
		return nil, err
	}
	v.keys = keys
	if k, ok := keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

func (v *jwtVerifier) load(ctx context.Context) ([]byte, error) {
	src := v.cfg.JWKS
	if !strings.HasPrefix(src, "https://") && !strings.HasPrefix(src, "http://") {
		f, err := os.Open(src)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, MaxJWKSBytes))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", src, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes))
}

// parseJWKS reads the RSA and EC signing keys of a JWKS, by kid.
func parseJWKS(b []byte) (map[string]any, error) {
	var set struct {
		Keys []struct {
			Kty, Kid, Use, Crv, N, E, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := base64.RawURLEncoding.DecodeString(k.N)
			e, err2 := base64.RawURLEncoding.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 || len(n) < 256 {
				continue
			}
			keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			default:
				continue
			}
			x, err1 := base64.RawURLEncoding.DecodeString(k.X)
			y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			pk := &ecdsa.PublicKey{Curve: c, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
			if !c.IsOnCurve(pk.X, pk.Y) { //nolint:staticcheck // the JWK's point is checked before use
				continue
			}
			keys[k.Kid] = pk
		}
	}
	return keys, nil
}

// verify checks a JWT and returns its subject and expiry; a token seen
// before is answered from the cache: accepted until its expiry (with the
// check's leeway), refused for jwtRefusedFor.
func (v *jwtVerifier) verify(ctx context.Context, token, resource string) (string, time.Time, error) {
	aud := v.cfg.Audience
	if aud == "" {
		aud = resource
	}
	k := jwtCacheKey{token: sha256.Sum256([]byte(token)), aud: aud}
	now := time.Now()
	v.cacheMu.Lock()
	c, ok := v.verified[k]
	v.cacheMu.Unlock()
	if ok && now.Before(c.until) {
		return c.sub, c.exp, c.err
	}
	sub, exp, err := v.check(ctx, token, aud)
	c = jwtVerdict{sub: sub, exp: exp, err: err, until: exp.Add(jwtLeeway)}
	if err != nil {
		if ctx.Err() != nil {
			return sub, exp, err // the request's end, not the token's fault
		}
		c.until = now.Add(jwtRefusedFor)
	}
	v.cacheMu.Lock()
	if v.verified == nil || len(v.verified) >= jwtCacheMax {
		v.verified = make(map[jwtCacheKey]jwtVerdict)
	}
	v.verified[k] = c
	v.cacheMu.Unlock()
	return sub, exp, err
}

// jwtLeeway is the clock skew allowed on exp (and nbf, iat).
const jwtLeeway = 30 * time.Second

// check verifies a JWT's signature and claims.
func (v *jwtVerifier) check(ctx context.Context, token, aud string) (string, time.Time, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	}, jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384"}),
		jwt.WithIssuer(v.cfg.Issuer), jwt.WithExpirationRequired(), jwt.WithLeeway(jwtLeeway))
	if err != nil {
		return "", time.Time{}, err
	}
	if !oauthex.MatchesResource(claims.Audience, aud) {
		return "", time.Time{}, fmt.Errorf("aud %v does not name %s", []string(claims.Audience), aud)
	}
	if claims.Subject == "" {
		return "", time.Time{}, errors.New("no sub")
	}
	return claims.Subject, claims.ExpiresAt.Time, nil
}
