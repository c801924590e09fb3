package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/agentbull/toolruntime/internal/tokenvault"
	"github.com/agentbull/toolruntime/tool"
)

// AuthRequiredError says that a call's credential owner holds no usable
// token for a server: a person must connect the account at URL.
type AuthRequiredError struct {
	Server string
	// Owner is the credential owner ("fair:<key>" or "agent:<id>").
	Owner string
	// URL is where a person connects the account; it holds no secret.
	URL    string
	Reason string
}

func (e *AuthRequiredError) Error() string {
	return fmt.Sprintf("mcp server %q needs an account connected (%s)", e.Server, e.Reason)
}

// ScopeLoopError says that the server refused a call for want of scopes
// that were granted already, more often than the server's max_step_ups:
// re-authorizing again would loop.
type ScopeLoopError struct {
	Server string
	Scopes []string
	Times  int
}

func (e *ScopeLoopError) Error() string {
	return fmt.Sprintf("mcp server %q still refuses the call for insufficient scope (%s) after %d re-authorizations", e.Server, strings.Join(e.Scopes, " "), e.Times)
}

// authFailure reports whether err is the owner's authorization failing,
// not the connection.
func authFailure(err error) bool {
	var ae *AuthRequiredError
	var se *ScopeLoopError
	return errors.As(err, &ae) || errors.As(err, &se)
}

// authError is the call's error for an authorization failure, or nil for
// any other error.
func authError(name string, err error) *tool.Error {
	var ae *AuthRequiredError
	if errors.As(err, &ae) {
		e := tool.Errorf(tool.AuthRequired,
			"The MCP server %s needs a person to connect an account before %s can be used. Tell the user; go on without this tool meanwhile, and try it again once the account is connected.",
			ae.Server, name)
		e.Auth = &tool.AuthNeeded{Server: ae.Server, URL: ae.URL}
		return e
	}
	var se *ScopeLoopError
	if errors.As(err, &se) {
		return tool.Errorf(tool.ToolError, "%v, so %s was not run. Do without it.", se, name)
	}
	return nil
}

// Credential owners: tokens are kept per owner.
const (
	ownerFairPrefix  = "fair:"
	ownerAgentPrefix = "agent:"
)

// OwnerFor is the credential owner of a call of agentID whose step draws
// from fairness key fairKey ("" for the agent's own), for a server
// configured with o: "" when its tokens are not per owner.
func OwnerFor(o *OAuthConfig, agentID, fairKey string) string {
	switch {
	case !o.perOwner():
		return ""
	case o.Owner == OwnerAgent:
		return ownerAgentPrefix + agentID
	}
	return ownerFairPrefix + cmp.Or(fairKey, agentID)
}

// turnOwner is the identity a catalog's listing runs for.
type turnOwner struct{ agent, fair string }

type turnOwnerKey struct{}

func withTurnOwner(ctx context.Context, agent, fair string) context.Context {
	return context.WithValue(ctx, turnOwnerKey{}, turnOwner{agent, fair})
}

// owner is the credential owner ctx runs for: a call's (tool.CallFrom),
// else a turn's listing.
func (s *server) owner(ctx context.Context) (string, error) {
	o := s.cfg.OAuth
	if !o.perOwner() {
		return "", nil
	}
	var agent, fair string
	if c, ok := tool.CallFrom(ctx); ok {
		agent, fair = c.AgentID, c.FairKey
	} else if t, ok := ctx.Value(turnOwnerKey{}).(turnOwner); ok {
		agent, fair = t.agent, t.fair
	}
	if agent == "" {
		return "", fmt.Errorf("mcp server %q: tokens are per agent, and this request is for none", s.name)
	}
	return OwnerFor(o, agent, fair), nil
}

// connectURL is where a person connects owner's account for the server.
func (m *Manager) connectURL(s *server, owner string) string {
	base := cmp.Or(s.cfg.OAuth.ConnectURL, m.opts.ConnectURL)
	if base == "" {
		return ""
	}
	return ConnectLink(base, s.name, owner)
}

// ConnectLink is base with the server and the owner key in its query.
func ConnectLink(base, server, owner string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	q := u.Query()
	q.Set("server", server)
	q.Set("key", owner)
	u.RawQuery = q.Encode()
	return u.String()
}

// challengeNote is what a worker keeps of a server's refusal for the
// connect flow (no secret): the request refused and its challenge, and
// the step-ups that did not help.
type challengeNote struct {
	Status          int       `json:"status"`
	URL             string    `json:"url"`
	WWWAuthenticate []string  `json:"www_authenticate,omitempty"`
	StepUps         int       `json:"step_ups,omitempty"`
	StepUpAt        time.Time `json:"step_up_at,omitzero"`
}

// stepUpWindow is how long failed step-ups are counted together.
const stepUpWindow = 10 * time.Minute

func parseNote(data []byte) (*challengeNote, error) {
	var n challengeNote
	if len(data) == 0 {
		return &n, nil
	}
	if err := json.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	if len(n.WWWAuthenticate) > 8 {
		n.WWWAuthenticate = n.WWWAuthenticate[:8]
	}
	return &n, nil
}

// authSeen records, for one attempt to start a session, the refusal
// that needs a person. The SDK's Connect, refused server/discover for
// want of a token, falls back to an initialize of the 2025 era, which a
// server of 2026-07-28 only refuses as malformed (no MCP-Protocol-Version
// header): the attempt's error would then read as the server being down
// (and back off) where it needs an account connected. dial reports the
// refusal instead.
type authSeen struct {
	mu  sync.Mutex
	err error
}

type authSeenKey struct{}

func (a *authSeen) set(err error) {
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.mu.Unlock()
}

func (a *authSeen) get() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// seen notes err on the attempt ctx belongs to, if any, and returns it.
func seen(ctx context.Context, err error) error {
	if a, ok := ctx.Value(authSeenKey{}).(*authSeen); ok && err != nil {
		a.set(err)
	}
	return err
}

// vaultHandler is the OAuth handler of one owner's session: it sends the
// owner's token from the vault (refreshed there when it expires), and on
// a refusal notes the server's challenge and ends the request with an
// AuthRequiredError. It never waits for a person.
type vaultHandler struct {
	s      *server
	owner  string
	client *http.Client
}

var _ auth.OAuthHandler = (*vaultHandler)(nil)

func (h *vaultHandler) TokenSource(context.Context) (oauth2.TokenSource, error) { return h, nil }

func (h *vaultHandler) required(reason string) error {
	return &AuthRequiredError{Server: h.s.name, Owner: h.owner, URL: h.s.m.connectURL(h.s, h.owner), Reason: reason}
}

// Token is the owner's token, for the Authorization header of a request.
func (h *vaultHandler) Token() (*oauth2.Token, error) {
	v := h.s.m.opts.Vault
	if v == nil {
		return nil, h.required("this worker has no token vault")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*h.s.cfg.OAuth.timeout())
	defer cancel()
	tok, err := v.Fresh(ctx, h.s.name, h.owner, h.refresh)
	var refused *oauth2.RetrieveError
	switch {
	case errors.Is(err, tokenvault.ErrNoToken):
		// The request goes without a token: the server's refusal (its
		// challenge, noted by Authorize) is what the connect flow starts
		// from. The transport sends a request without Authorization on
		// this error.
		return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "no token for this agent"}
	case errors.As(err, &refused):
		// The authorization server answered and refused the refresh
		// token (revoked, expired): only a person can help.
		return nil, h.required("the authorization server refused to refresh the token")
	case err != nil:
		// It did not answer usably (it hung, sent too much, or
		// redirected where the guard forbids): this call fails.
		h.s.log.Warn("mcp oauth token refresh failed", "err", err)
		return nil, fmt.Errorf("the account's token could not be refreshed: %w", err)
	}
	return &oauth2.Token{AccessToken: tok.AccessToken, TokenType: "Bearer", Expiry: tok.Expiry}, nil
}

// refresh exchanges the token's refresh token at its token endpoint,
// through the guarded client (bounded in time and size), with the
// resource indicator the token was granted for (RFC 8707 asks for it on
// refresh too; x/oauth2's refresh cannot add it). An answer of 400 or
// 401 is the authorization server refusing (an *oauth2.RetrieveError:
// only a person can help); anything else unusable is this call's error.
func (h *vaultHandler) refresh(ctx context.Context, old *tokenvault.Token) (*tokenvault.Token, error) {
	if old.TokenURL == "" {
		return nil, errors.New("no token endpoint recorded")
	}
	return refreshToken(ctx, h.client, old)
}

func refreshToken(ctx context.Context, client *http.Client, old *tokenvault.Token) (*tokenvault.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {old.RefreshToken}}
	if old.Resource != "" {
		form.Set("resource", old.Resource)
	}
	req, err := clientPost(ctx, old.TokenURL, form, old)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		return nil, fmt.Errorf("the token endpoint did not answer in time: %w", err)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body) // bounded by the client
	if err != nil {
		return nil, err
	}
	return tokenAnswer(resp, body, time.Now())
}

// clientPost is a form POST to one of tok's authorization server's
// endpoints, authenticated as tok's client: its id (and secret) in the
// form when it has no secret or sends it so, else HTTP Basic (RFC 6749
// 2.3.1: the id and secret form-encoded, then Basic).
func clientPost(ctx context.Context, endpoint string, form url.Values, tok *tokenvault.Token) (*http.Request, error) {
	basic := tok.ClientSecret != "" && oauth2.AuthStyle(tok.AuthStyle) != oauth2.AuthStyleInParams
	if !basic {
		form.Set("client_id", tok.ClientID)
		if tok.ClientSecret != "" {
			form.Set("client_secret", tok.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if basic {
		req.SetBasicAuth(url.QueryEscape(tok.ClientID), url.QueryEscape(tok.ClientSecret))
	}
	return req, nil
}

// tokenAnswer reads a token endpoint's answer to a refresh (untrusted
// bytes): a 400 or 401 is the authorization server refusing (an
// *oauth2.RetrieveError), another status that is not 2xx or an answer
// without an access token is an error.
func tokenAnswer(resp *http.Response, body []byte, now time.Time) (*tokenvault.Token, error) {
	var tr struct {
		AccessToken      string      `json:"access_token"`
		TokenType        string      `json:"token_type"`
		RefreshToken     string      `json:"refresh_token"`
		ExpiresIn        json.Number `json:"expires_in"`
		Scope            string      `json:"scope"`
		Error            string      `json:"error"`
		ErrorDescription string      `json:"error_description"`
	}
	jsonErr := json.Unmarshal(body, &tr)
	switch {
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized:
		return nil, &oauth2.RetrieveError{Response: resp, Body: body, ErrorCode: tr.Error, ErrorDescription: tr.ErrorDescription}
	case resp.StatusCode/100 != 2:
		return nil, fmt.Errorf("the token endpoint answered %s", resp.Status)
	case jsonErr != nil:
		return nil, fmt.Errorf("the token endpoint's answer is not JSON: %w", jsonErr)
	case tr.AccessToken == "":
		return nil, errors.New("the token endpoint's answer holds no access_token")
	}
	t := &tokenvault.Token{AccessToken: tr.AccessToken, TokenType: tr.TokenType, RefreshToken: tr.RefreshToken}
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 && n < 1<<31 {
		t.Expiry = now.Add(time.Duration(n) * time.Second)
	}
	if tr.Scope != "" {
		t.Scopes = strings.Fields(tr.Scope)
	}
	return t, nil
}

// Authorize notes the server's refusal for the connect flow and ends the
// request: a 401 (no token, or one refused) or a 403 insufficient_scope
// needs a person. A 403 for scopes already granted counts as a step-up
// that did not help; past the server's max_step_ups it is a ScopeLoopError.
func (h *vaultHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	values := resp.Header.Values("WWW-Authenticate")
	chs, _ := oauthex.ParseWWWAuthenticate(values)
	if resp.StatusCode == http.StatusForbidden && challengeParam(chs, "error") != "insufficient_scope" {
		return nil // not ours: the retried request's 403 reaches the caller
	}
	v := h.s.m.opts.Vault
	if v == nil {
		return h.required("this worker has no token vault")
	}
	data, err := v.GetNote(ctx, h.s.name, h.owner)
	if err != nil {
		return err
	}
	note, err := parseNote(data)
	if err != nil {
		note = &challengeNote{}
	}
	note.Status, note.URL, note.WWWAuthenticate = resp.StatusCode, req.URL.String(), values
	reason := "the server refused the token"
	if resp.StatusCode == http.StatusForbidden {
		reason = "the server wants more scope"
		want := strings.Fields(challengeParam(chs, "scope"))
		tok, _, _ := v.Get(ctx, h.s.name, h.owner)
		if tok != nil && len(want) > 0 && subset(want, tok.Scopes) {
			if time.Since(note.StepUpAt) > stepUpWindow {
				note.StepUps = 0
			}
			note.StepUps++
			note.StepUpAt = time.Now()
			if note.StepUps > h.s.cfg.OAuth.maxStepUps() {
				if b, err := json.Marshal(note); err == nil {
					_ = v.PutNote(ctx, h.s.name, h.owner, b)
				}
				return seen(ctx, &ScopeLoopError{Server: h.s.name, Scopes: want, Times: note.StepUps - 1})
			}
		}
	}
	if b, err := json.Marshal(note); err == nil {
		if err := v.PutNote(ctx, h.s.name, h.owner, b); err != nil {
			return err
		}
	}
	return seen(ctx, h.required(reason))
}

func challengeParam(chs []oauthex.Challenge, name string) string {
	for _, c := range chs {
		if strings.EqualFold(c.Scheme, "bearer") {
			if v := c.Params[name]; v != "" {
				return v
			}
		}
	}
	return ""
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// oauthHandler is the handler of a session of owner, or nil for a server
// without oauth.
func (s *server) oauthHandler(owner string) (auth.OAuthHandler, error) {
	o := s.cfg.OAuth
	switch {
	case o == nil:
		return nil, nil
	case o.clientCredentials():
		s.ccOnce.Do(func() {
			s.cc, s.ccErr = extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
				Credentials: &oauthex.ClientCredentials{ClientID: expand(o.ClientID),
					ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: expand(o.ClientSecret)}},
				HTTPClient: oauthClient(o, s.m.opts.Guard),
			})
		})
		return s.cc, s.ccErr
	}
	return &vaultHandler{s: s, owner: owner, client: oauthClient(o, s.m.opts.Guard)}, nil
}
