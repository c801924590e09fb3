package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// Connector runs the authorization code flow for a person connecting an
// account of an MCP server (the console's connect page, the conformance
// harness), and stores the token in the vault, where every worker's next
// call finds it: no restart. It is safe for concurrent use.
type Connector struct {
	Config Config
	Vault  *tokenvault.Vault
	// Guard dials the server and its authorization server (nil: public
	// addresses only; a server's allow_private lifts it).
	Guard *netguard.Guard
	// RedirectURL is where the authorization server sends the person
	// back: the console's callback.
	RedirectURL string
}

// Servers names the configured servers a person connects an account of
// (oauth with the authorization code grant), sorted.
func (c *Connector) Servers() []string {
	var out []string
	for _, name := range c.Config.names() {
		if c.Config.Servers[name].OAuth.perOwner() {
			out = append(out, name)
		}
	}
	return out
}

func (c *Connector) server(name string) (ServerConfig, error) {
	sc, ok := c.Config.Servers[name]
	if !ok || !sc.OAuth.perOwner() || sc.URL == "" {
		return ServerConfig{}, fmt.Errorf("no MCP server %q to connect an account of", name)
	}
	return sc, nil
}

func (c *Connector) guard() *netguard.Guard {
	if c.Guard == nil {
		return netguard.New(nil, nil)
	}
	return c.Guard
}

// Connected reports whether owner holds a token for server.
func (c *Connector) Connected(ctx context.Context, server, owner string) (bool, error) {
	if _, err := c.server(server); err != nil {
		return false, err
	}
	_, _, err := c.Vault.Get(ctx, server, owner)
	if errors.Is(err, tokenvault.ErrNoToken) {
		return false, nil
	}
	return err == nil, err
}

// Connect runs the flow for owner: the server's challenge (the one a
// worker noted, else a fresh unauthenticated request), protected resource
// and authorization server discovery, registration (client metadata
// document, then the pre-registered client, then dynamic registration),
// PKCE, the resource indicator, the iss check, and the code exchange.
// fetch directs the person to the authorization URL and returns what the
// redirect brought back; it may block until the person comes back. The
// scopes granted before are kept (step-up).
func (c *Connector) Connect(ctx context.Context, server, owner string, fetch auth.AuthorizationCodeFetcher) error {
	sc, err := c.server(server)
	if err != nil {
		return err
	}
	o := sc.OAuth
	client := oauthClient(o, c.guard())
	req, resp, err := c.challenge(ctx, server, owner, sc, client)
	if err != nil {
		return err
	}
	var granted []string
	if old, _, err := c.Vault.Get(ctx, server, owner); err == nil {
		granted = old.Scopes
	}
	var got struct {
		cfg      *oauth2.Config
		tok      *oauth2.Token
		resource string
		issuer   string
	}
	// The authorization request names the resource the token is for
	// (RFC 8707): the refreshes name it again.
	remember := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		if u, err := url.Parse(args.URL); err == nil {
			got.resource = u.Query().Get("resource")
		}
		res, err := fetch(ctx, args)
		if res != nil {
			got.issuer = res.Iss
		}
		return res, err
	}
	hc := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              c.RedirectURL,
		AuthorizationCodeFetcher: remember,
		RequestRefreshToken:      true,
		Client:                   client,
		ScopeFilter: func(discovered []string) []string {
			want := discovered
			if len(o.Scopes) > 0 {
				want = slices.Clone(o.Scopes)
			}
			for _, s := range granted {
				if !slices.Contains(want, s) {
					want = append(want, s)
				}
			}
			return want
		},
		NewTokenSource: func(_ context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			got.cfg, got.tok = cfg, tok
			return oauth2.StaticTokenSource(tok), nil
		},
	}
	if o.ClientMetadataURL != "" {
		hc.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: expand(o.ClientMetadataURL)}
	}
	if id := expand(o.ClientID); id != "" {
		hc.PreregisteredClient = &oauthex.ClientCredentials{ClientID: id}
		if secret := expand(o.ClientSecret); secret != "" {
			hc.PreregisteredClient.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: secret}
		}
	}
	if o.DynamicRegistration == nil || *o.DynamicRegistration {
		hc.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{c.RedirectURL},
			ClientName:   "toolruntime",
			GrantTypes:   []string{"authorization_code", "refresh_token"},
		}}
	}
	h, err := auth.NewAuthorizationCodeHandler(hc)
	if err != nil {
		return fmt.Errorf("mcp server %q: %w", server, err)
	}
	if err := h.Authorize(ctx, req, resp); err != nil {
		return fmt.Errorf("mcp server %q: authorization: %w", server, err)
	}
	if got.tok == nil {
		return fmt.Errorf("mcp server %q: authorization gave no token", server)
	}
	tok := &tokenvault.Token{AccessToken: got.tok.AccessToken, TokenType: got.tok.TokenType, RefreshToken: got.tok.RefreshToken, Expiry: got.tok.Expiry,
		Scopes: got.cfg.Scopes, TokenURL: got.cfg.Endpoint.TokenURL, ClientID: got.cfg.ClientID, ClientSecret: got.cfg.ClientSecret,
		AuthStyle: int(got.cfg.Endpoint.AuthStyle), Resource: got.resource, Issuer: got.issuer}
	if s, ok := got.tok.Extra("scope").(string); ok && s != "" {
		tok.Scopes = unionScopes(tok.Scopes, strings.Fields(s))
	}
	return c.Vault.Put(ctx, server, owner, tok)
}

func unionScopes(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// challenge is the refusal the flow starts from: the one a worker noted
// for owner, else the server's answer to an unauthenticated initialize
// (a server that answers it is asked through its well-known metadata).
func (c *Connector) challenge(ctx context.Context, server, owner string, sc ServerConfig, client *http.Client) (*http.Request, *http.Response, error) {
	if data, err := c.Vault.GetNote(ctx, server, owner); err == nil && data != nil {
		if n, err := parseNote(data); err == nil && (n.Status == http.StatusUnauthorized || n.Status == http.StatusForbidden) {
			if u, err := url.Parse(n.URL); err == nil && sameServer(u, sc.URL) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, nil)
				return req, &http.Response{StatusCode: n.Status, Header: http.Header{"Www-Authenticate": n.WWWAuthenticate}, Body: http.NoBody, Request: req}, nil
			}
		}
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toolruntime","version":"connect"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sc.URL, bytes.NewReader([]byte(body)))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp server %q: %w", server, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return req, &http.Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: http.NoBody, Request: req}, nil
	}
	return req, &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// sameServer reports whether u is on the configured server's origin.
func sameServer(u *url.URL, server string) bool {
	s, err := url.Parse(server)
	return err == nil && strings.EqualFold(u.Scheme, s.Scheme) && strings.EqualFold(u.Host, s.Host)
}

// Disconnect forgets owner's token for server, after asking the
// authorization server to revoke it (RFC 7009) when it advertises a
// revocation endpoint; a failed revocation does not keep the token.
func (c *Connector) Disconnect(ctx context.Context, server, owner string) error {
	sc, err := c.server(server)
	if err != nil {
		return err
	}
	var revokeErr error
	if tok, _, err := c.Vault.Get(ctx, server, owner); err == nil {
		revokeErr = c.revoke(ctx, sc, tok)
	}
	if err := c.Vault.Delete(ctx, server, owner); err != nil {
		return err
	}
	if err := c.Vault.DeleteNote(ctx, server, owner); err != nil {
		return err
	}
	return revokeErr
}

func (c *Connector) revoke(ctx context.Context, sc ServerConfig, tok *tokenvault.Token) error {
	if tok.TokenURL == "" {
		return nil
	}
	client := oauthClient(sc.OAuth, c.guard())
	u, err := url.Parse(tok.TokenURL)
	if err != nil {
		return nil
	}
	issuer := tok.Issuer
	if issuer == "" {
		issuer = u.Scheme + "://" + u.Host
	}
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, client)
	if err != nil || asm == nil || asm.RevocationEndpoint == "" {
		return nil
	}
	for _, t := range []struct{ value, hint string }{{tok.RefreshToken, "refresh_token"}, {tok.AccessToken, "access_token"}} {
		if t.value == "" {
			continue
		}
		req, err := clientPost(ctx, asm.RevocationEndpoint, url.Values{"token": {t.value}, "token_type_hint": {t.hint}}, tok)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("revoking the %s: %w", t.hint, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("revoking the %s: the authorization server answered %s", t.hint, resp.Status)
		}
	}
	return nil
}
