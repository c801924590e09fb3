package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/mcp"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/tokenvault"
)

// connectFlags are the flags of the connect page: the workers' MCP
// servers file and token keys (the same as theirs), and the console's
// address as browsers reach it (the OAuth redirect lands on it).
type connectFlags struct {
	mcpConfig, tokenKeys, publicURL, webAllow string
}

func (c *connectFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.mcpConfig, "mcp-config", "", "the workers' MCP servers file: with it, the connect page (/connect) lets a person connect the accounts of its oauth servers (empty: no connect page)")
	fs.StringVar(&c.tokenKeys, "mcp-token-keys", "", "file of the workers' keys sealing MCP OAuth tokens (as the worker's flag; empty: the environment variable TOOLRUNTIME_MCP_TOKEN_KEYS)")
	fs.StringVar(&c.publicURL, "public-url", "", "the console's URL as browsers reach it, e.g. https://console.example (the OAuth redirect is <it>/connect/callback); default: the --listen address")
	fs.StringVar(&c.webAllow, "web-allow", "", "hosts or CIDRs the connect flow may reach although private (comma-separated; as the worker's flag)")
}

// connector builds the connect page's connector, or nil without
// --mcp-config. base is the listen address's URL, the default of
// --public-url.
func (c *connectFlags) connector(ctx context.Context, nc *nats.Conn, base string) (*mcp.Connector, error) {
	if c.mcpConfig == "" {
		return nil, nil
	}
	cfg, err := mcp.LoadConfig(c.mcpConfig)
	if err != nil {
		return nil, fmt.Errorf("--mcp-config: %w", err)
	}
	pub := strings.TrimRight(c.publicURL, "/")
	if pub == "" {
		pub = base
	}
	if u, err := url.Parse(pub); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--public-url %q is not an http(s) URL", c.publicURL)
	}
	var allow []string
	for _, a := range strings.Split(c.webAllow, ",") {
		if a = strings.TrimSpace(a); a != "" {
			allow = append(allow, a)
		}
	}
	al, err := netguard.ParseAllow(allow)
	if err != nil {
		return nil, fmt.Errorf("--web-allow: %w", err)
	}
	// The keys never leave the process: not NATS, not a log.
	keys, err := tokenvault.LoadKeyring(c.tokenKeys, "TOOLRUNTIME_MCP_TOKEN_KEYS")
	if err != nil {
		return nil, fmt.Errorf("the connect page needs the workers' token keys: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	v, err := tokenvault.Open(ctx, js, keys, tokenvault.Options{})
	if err != nil {
		return nil, err
	}
	return &mcp.Connector{Config: cfg, Vault: v, Guard: netguard.New(al, nil), RedirectURL: pub + "/connect/callback"}, nil
}
