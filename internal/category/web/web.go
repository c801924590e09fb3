package web

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"

	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that offers the category to a turn.
const Binding = "web"

// Tool names, in catalog order.
const (
	SearchName = "web_search"
	FetchName  = "web_fetch"
)

// Defaults of a zero Config field.
const (
	DefaultTimeout      = 30 * time.Second
	DefaultMaxBytes     = 5 << 20
	DefaultMaxRedirects = 5
	DefaultOutputBudget = 16 << 10
	DefaultResults      = 8
	MaxResults          = 20
	DefaultUserAgent    = "toolruntime-web/1 (+https://github.com/agentbull/toolruntime)"
)

// MinOutputBudget is the smallest OutputBudget New accepts.
const MinOutputBudget = 2 << 10

// Config configures the category. The zero value offers no tool: set
// Fetch, a SearchURL or a Search provider. The zero value of every limit
// is its default.
type Config struct {
	// Fetch offers web_fetch.
	Fetch bool
	// SearchURL is the base URL of a SearXNG instance (its JSON API must
	// be enabled); with it, or with Search, web_search is offered.
	SearchURL string
	// Search is the provider web_search uses instead of SearXNG at
	// SearchURL.
	Search Provider
	// Allow lets web_fetch reach addresses that are not public: CIDR
	// ranges ("10.1.0.0/16"), addresses ("127.0.0.1", "::1"), host names
	// ("intranet.example") and name suffixes ("*.corp.example"), each
	// optionally limited to a port ("127.0.0.1:8080", "[::1]:8080",
	// "intranet.example:8443"). Everything else that is loopback,
	// private, link-local (cloud metadata), multicast, CGNAT, reserved
	// or unspecified is refused, after name resolution, at dial time.
	Allow []string
	// Resolver resolves host names for web_fetch (net.DefaultResolver).
	Resolver netguard.Resolver
	// Timeout bounds one fetch or search, redirects and body included
	// (30 s).
	Timeout time.Duration
	// MaxBytes bounds the body read from a page (5 MiB); the rest is
	// not read and the answer says so.
	MaxBytes int64
	// MaxRedirects bounds the redirects one fetch follows (5); negative
	// follows none.
	MaxRedirects int
	// OutputBudget bounds the text of any one result the model reads,
	// in bytes (16 KiB).
	OutputBudget int
	// UserAgent is sent with every request.
	UserAgent string
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	switch {
	case c.MaxRedirects == 0:
		c.MaxRedirects = DefaultMaxRedirects
	case c.MaxRedirects < 0:
		c.MaxRedirects = 0
	}
	if c.OutputBudget == 0 {
		c.OutputBudget = DefaultOutputBudget
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	return c
}

// Category is the web category, built once and shared by every turn.
type Category struct {
	cfg    Config
	client *http.Client // web_fetch's, through the guard
	md     *converter.Converter
	tools  []*tool.Tool
}

// New checks cfg and builds the tools it offers.
func New(cfg Config) (*Category, error) {
	cfg = cfg.withDefaults()
	var errs []error
	if cfg.Timeout < 0 || cfg.MaxBytes < 0 {
		errs = append(errs, errors.New("web: limits must not be negative"))
	}
	if cfg.OutputBudget < MinOutputBudget {
		errs = append(errs, fmt.Errorf("web: output budget %d is below the minimum of %d bytes", cfg.OutputBudget, MinOutputBudget))
	}
	allow, err := netguard.ParseAllow(cfg.Allow)
	if err != nil {
		errs = append(errs, fmt.Errorf("web: %w", err))
	}
	provider := cfg.Search
	if provider == nil && cfg.SearchURL != "" {
		sx, err := NewSearXNG(cfg.SearchURL, SearXNGOptions{Timeout: cfg.Timeout, UserAgent: cfg.UserAgent})
		if err != nil {
			errs = append(errs, err)
		}
		provider = sx
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	c := &Category{cfg: cfg}
	if provider != nil {
		c.tools = append(c.tools, c.searchTool(provider))
	}
	if cfg.Fetch {
		c.client = newClient(cfg, netguard.New(allow, cfg.Resolver))
		c.md = newMarkdown()
		c.tools = append(c.tools, c.fetchTool())
	}
	return c, nil
}

// Tools returns the tools the configuration offers, in catalog order.
func (c *Category) Tools() []*tool.Tool { return c.tools }

// Close drops idle connections.
func (c *Category) Close() {
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
}

// Category returns the category: its tools for any turn (main or task)
// that binds "web", nothing otherwise or when the configuration offers
// none.
func (c *Category) Category() tool.Category {
	return tool.NewCategory(Binding, c.tools...)
}
