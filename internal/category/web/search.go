package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// Provider answers web searches. Implementations are safe for concurrent
// use, honour ctx, and return at most n results, best first. An error is
// worded for the model and must not reveal the provider's address.
type Provider interface {
	Search(ctx context.Context, query string, n int) ([]Result, error)
}

// Result is one search result.
type Result struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// SearXNGOptions configure a SearXNG provider; the zero value works.
type SearXNGOptions struct {
	// Client makes the requests; nil: a plain client with Timeout. The
	// provider's address is the operator's, so it is not subject to
	// web_fetch's address guard (it is often on a private network).
	Client *http.Client
	// Timeout bounds one search when Client is nil (30 s).
	Timeout time.Duration
	// UserAgent is sent with every request.
	UserAgent string
	// MaxBytes bounds the JSON read from one answer (4 MiB).
	MaxBytes int64
}

// SearXNG is a Provider over a SearXNG instance's JSON API
// (GET <base>/search?q=…&format=json; "json" must be among the
// instance's search.formats).
type SearXNG struct {
	endpoint string
	opts     SearXNGOptions
}

// NewSearXNG returns a provider for the SearXNG instance at base, an
// http or https URL.
func NewSearXNG(base string, opts SearXNGOptions) (*SearXNG, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("web: search URL %q is not an http or https URL", base)
	}
	u.RawQuery, u.Fragment = "", ""
	u = u.JoinPath("search")
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: opts.Timeout}
	}
	if opts.UserAgent == "" {
		opts.UserAgent = DefaultUserAgent
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 4 << 20
	}
	return &SearXNG{endpoint: u.String(), opts: opts}, nil
}

// searxngAnswer is the part of SearXNG's JSON answer that is read.
type searxngAnswer struct {
	Results []struct {
		Title   string `json:"title"`
		URL     string `json:"url"`
		Content string `json:"content"`
	} `json:"results"`
}

// Search implements Provider.
func (s *SearXNG) Search(ctx context.Context, query string, n int) ([]Result, error) {
	q := url.Values{"q": {query}, "format": {"json"}, "pageno": {"1"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.endpoint+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", s.opts.UserAgent)
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the provider's URL
		}
		return nil, fmt.Errorf("the search provider could not be reached: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return nil, errors.New("the search provider refused the request (403); its JSON format may be disabled (SearXNG: search.formats must include json)")
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, errors.New("the search provider is rate limiting (429); try again later")
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("the search provider answered %s", resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.opts.MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the search provider's answer: %w", err)
	}
	if int64(len(data)) > s.opts.MaxBytes {
		return nil, fmt.Errorf("the search provider's answer is over %s", textclip.ByteCount(s.opts.MaxBytes))
	}
	return parseSearXNG(data, n)
}

// parseSearXNG reads up to n results from a SearXNG JSON answer, skipping
// results without a URL and repeats of one.
func parseSearXNG(data []byte, n int) ([]Result, error) {
	var a searxngAnswer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("the search provider's answer is not SearXNG JSON: %w", err)
	}
	out := make([]Result, 0, min(n, len(a.Results)))
	seen := map[string]bool{}
	for _, r := range a.Results {
		if len(out) == n {
			break
		}
		u := strings.TrimSpace(r.URL)
		if u == "" || seen[u] {
			continue
		}
		seen[u] = true
		out = append(out, Result{Title: oneLine(r.Title), URL: u, Snippet: oneLine(r.Content)})
	}
	return out, nil
}

// SearchParams are web_search's parameters.
type SearchParams struct {
	Query string `json:"query" jsonschema:"description=What to search the web for.,minLength=1,maxLength=400"`
	Count int    `json:"count,omitempty" jsonschema:"description=How many results to return (default 8).,minimum=1,maximum=20"`
}

// SearchDetails are web_search's details.
type SearchDetails struct {
	Query     string   `json:"query"`
	Results   []Result `json:"results"`
	Truncated bool     `json:"truncated"`
}

// maxSnippet bounds one result's snippet, in runes.
const maxSnippet = 300

func (c *Category) searchTool(p Provider) *tool.Tool {
	return tool.Must(tool.Def[SearchParams]{
		Spec: tool.Spec{Name: SearchName, ReadOnly: true, Timeout: c.cfg.Timeout + 5*time.Second,
			Description: "Search the web. Returns titles, URLs and snippets, best first; read a result with web_fetch."},
		Activity: func(sp SearchParams) string { return "Searching the web for " + textclip.Runes(oneLine(sp.Query), 60) },
		CompletedActivity: func(sp SearchParams, r tool.Result) string {
			if d, ok := r.Details.(*SearchDetails); ok {
				return fmt.Sprintf("Searched the web for %s (%d results)", textclip.Runes(oneLine(sp.Query), 60), len(d.Results))
			}
			return "Searched the web for " + textclip.Runes(oneLine(sp.Query), 60)
		},
		Execute: func(ctx context.Context, sp SearchParams) (tool.Result, error) {
			return c.search(ctx, p, sp)
		},
	})
}

func (c *Category) search(ctx context.Context, p Provider, sp SearchParams) (tool.Result, error) {
	n := sp.Count
	if n <= 0 {
		n = DefaultResults
	}
	n = min(n, MaxResults)
	sctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errFetchTimeout)
	defer cancel()
	results, err := p.Search(sctx, sp.Query, n)
	switch {
	case ctx.Err() != nil:
		return tool.Result{}, context.Cause(ctx)
	case context.Cause(sctx) == errFetchTimeout:
		return tool.Result{}, tool.Errorf(tool.Timeout, "The search did not answer within %s.", c.cfg.Timeout)
	case err != nil:
		return tool.Result{}, tool.Errorf(tool.ToolError, "The search failed: %v.", err)
	}
	results = results[:min(len(results), n)]
	d := &SearchDetails{Query: sp.Query, Results: results}
	if len(results) == 0 {
		return tool.Result{Content: fmt.Sprintf("No results for %q.", sp.Query), Details: d}, nil
	}
	var b strings.Builder
	room := c.cfg.OutputBudget - noteReserve
	for i, r := range results {
		var e strings.Builder
		fmt.Fprintf(&e, "%d. %s\n   %s\n", i+1, textclip.Runes(r.Title, 200), r.URL)
		if r.Snippet != "" {
			fmt.Fprintf(&e, "   %s\n", textclip.Runes(r.Snippet, maxSnippet))
		}
		if b.Len()+e.Len() > room {
			d.Truncated = true
			fmt.Fprintf(&b, "[%d more results left out to fit the output budget]\n", len(results)-i)
			break
		}
		b.WriteString(e.String())
	}
	return tool.Result{Content: b.String(), Details: d}, nil
}
