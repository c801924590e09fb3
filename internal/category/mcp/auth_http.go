package mcp

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/agentbull/toolruntime/internal/netguard"
)

// maxOAuthRedirects bounds the redirects one OAuth request follows (a
// metadata document moved); each is dialed through the guard.
const maxOAuthRedirects = 3

// guardedTransport dials through g, or directly when g is nil (a server
// configured with allow_private). No proxy from the environment is used:
// it would be dialed instead of the checked address.
func guardedTransport(g *netguard.Guard) *http.Transport {
	dial := (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if g != nil {
		dial = g.DialContext
	}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            dial,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
}

// oauthClient is the client of every OAuth request of a server: metadata
// discovery, registration, the token endpoint, refresh, revocation. Each
// request, redirects included, is dialed through the guard, ends within
// the configured timeout (a token endpoint that hangs ends one call), and
// its response body is bounded (an oversized one fails).
func oauthClient(o *OAuthConfig, g *netguard.Guard) *http.Client {
	if o.AllowPrivate {
		g = nil
	}
	tr := guardedTransport(g)
	tr.ResponseHeaderTimeout = o.timeout()
	return &http.Client{
		Timeout:   o.timeout(),
		Transport: boundedTransport{base: tr, max: o.maxResponse()},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxOAuthRedirects {
				return fmt.Errorf("OAuth request stopped after %d redirects", maxOAuthRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("OAuth request redirected to a %s URL", req.URL.Scheme)
			}
			return nil
		},
	}
}

// errOAuthTooLarge fails an authorization server's response over the
// bound.
var errOAuthTooLarge = errors.New("the authorization server's response is larger than the worker takes (oauth max_response_bytes)")

// boundedTransport bounds every response body to max bytes.
type boundedTransport struct {
	base http.RoundTripper
	max  int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w: %d bytes from %s", errOAuthTooLarge, resp.ContentLength, r.URL.Redacted())
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.max, err: errOAuthTooLarge}
	return resp, nil
}
