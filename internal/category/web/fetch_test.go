package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/text/encoding/japanese"

	"github.com/agentbull/toolruntime/internal/category/web"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// server is an httptest server on 127.0.0.1 that counts its requests.
type server struct {
	*httptest.Server
	hits atomic.Int64
}

func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// hostPort is the server's 127.0.0.1:port, as an allow-list entry.
func (s *server) hostPort() string { return strings.TrimPrefix(s.URL, "http://") }

func newWeb(t *testing.T, cfg web.Config) *web.Category {
	t.Helper()
	c, err := web.New(cfg)
	if err != nil {
		t.Fatalf("web.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func webTool(t *testing.T, c *web.Category, name string) *tool.Tool {
	t.Helper()
	for _, tl := range c.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return nil
}

func fetchCtx(t *testing.T, ctx context.Context, c *web.Category, args any) (tool.Result, error) {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	inv, err := tools.Prepare(webTool(t, c, web.FetchName), string(b), 0)
	if err != nil {
		return tool.Result{}, err
	}
	return inv.Run(tools.WithCall(ctx, tool.Call{AgentID: "a1", TurnID: "t1", CallID: "c1"}))
}

func fetch(t *testing.T, c *web.Category, rawURL string) (tool.Result, error) {
	t.Helper()
	return fetchCtx(t, context.Background(), c, map[string]any{"url": rawURL})
}

func kindOf(err error) tool.Kind {
	var te *tool.Error
	if errors.As(err, &te) {
		return te.Kind
	}
	return ""
}

func fetchDetails(t *testing.T, res tool.Result) *web.FetchDetails {
	t.Helper()
	d, ok := res.Details.(*web.FetchDetails)
	if !ok {
		t.Fatalf("details are %T", res.Details)
	}
	return d
}

// names is a resolver with a fixed table.
type names map[string][]netip.Addr

func (n names) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := n[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func ok(w http.ResponseWriter, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	_, _ = w.Write([]byte(body))
}

// Without an allow-list nothing local is reached: not the test server by
// its address, not by a name that resolves to loopback, and not through
// a redirect from a server that is allowed.
func TestFetchRefusesLocalAddresses(t *testing.T) {
	target := newServer(t, func(w http.ResponseWriter, _ *http.Request) { ok(w, "text/plain", "internal secret") })
	port := target.Listener.Addr().(*net.TCPAddr).Port
	redirector := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	via := func(to string) string { return redirector.URL + "/?to=" + url.QueryEscape(to) }
	strict := newWeb(t, web.Config{Fetch: true})
	// Only the redirector is allowed, by address and port.
	allowRedirector := newWeb(t, web.Config{Fetch: true, Allow: []string{redirector.hostPort()}})
	// A public-looking name that resolves to loopback.
	rebinding := newWeb(t, web.Config{Fetch: true, Resolver: names{
		"news.example": {netip.MustParseAddr("127.0.0.1")},
		"dual.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")},
	}})
	tests := []struct {
		name   string
		c      *web.Category
		url    string
		reason string
	}{
		{"the test server by address", strict, target.URL, "127.0.0.1 is a loopback address"},
		{"localhost", strict, fmt.Sprintf("http://localhost:%d/", port), "localhost resolves to 127.0.0.1, a loopback address"},
		{"a name resolving to loopback", rebinding, fmt.Sprintf("http://news.example:%d/", port), "news.example resolves to 127.0.0.1"},
		{"a name with one loopback address", rebinding, fmt.Sprintf("http://dual.example:%d/", port), "dual.example resolves to 127.0.0.1"},
		{"IPv4-mapped loopback", strict, fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port), "loopback"},
		{"IPv6 loopback", strict, fmt.Sprintf("http://[::1]:%d/", port), "loopback"},
		{"metadata", strict, "http://169.254.169.254/latest/meta-data/", "cloud metadata"},
		{"redirect to a loopback port not allowed", allowRedirector, via(target.URL), "127.0.0.1 is a loopback address"},
		{"redirect to localhost", allowRedirector, via(fmt.Sprintf("http://localhost:%d/", port)), "localhost resolves to 127.0.0.1"},
		{"redirect to another loopback address", allowRedirector, via(fmt.Sprintf("http://127.0.0.2:%d/", port)), "127.0.0.2 is a loopback address"},
		{"redirect to a private address", allowRedirector, via("http://10.0.0.1/admin"), "10.0.0.1 is a private network address"},
		{"redirect to metadata", allowRedirector, via("http://169.254.169.254/latest/meta-data/iam/"), "cloud metadata"},
		{"redirect to IPv4-mapped", allowRedirector, via(fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", port)), "loopback"},
		{"redirect chain to a private address", allowRedirector, via(via(via("http://192.168.0.1/"))), "192.168.0.1 is a private network address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := fetch(t, tt.c, tt.url)
			if kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "Refused to fetch") || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want a refusal saying %q", err, tt.reason)
			}
			if strings.Contains(res.Content, "internal secret") {
				t.Error("the content leaked")
			}
			if n := target.hits.Load(); n != 0 {
				t.Errorf("the target was reached %d times", n)
			}
		})
	}
}

// The allow-list lets the operator reach a local server, and the
// redirect chain on it is followed.
func TestFetchAllowListed(t *testing.T) {
	target := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/start" {
			http.Redirect(w, r, "/middle", http.StatusMovedPermanently)
			return
		}
		if r.URL.Path == "/middle" {
			http.Redirect(w, r, "/end", http.StatusFound)
			return
		}
		ok(w, "text/plain; charset=utf-8", "reached "+r.URL.Path)
	})
	for _, allow := range [][]string{{"127.0.0.1"}, {"127.0.0.0/8"}, {target.hostPort()}} {
		c := newWeb(t, web.Config{Fetch: true, Allow: allow})
		res, err := fetch(t, c, target.URL+"/start")
		if err != nil {
			t.Fatalf("allow %v: %v", allow, err)
		}
		d := fetchDetails(t, res)
		if !strings.Contains(res.Content, "reached /end") || d.FinalURL != target.URL+"/end" || len(d.Redirects) != 2 || d.Status != 200 {
			t.Errorf("allow %v: %q %+v", allow, res.Content, d)
		}
		if !strings.Contains(res.Content, "(redirected from "+target.URL+"/start)") {
			t.Errorf("the answer does not say it was redirected:\n%s", res.Content)
		}
	}
}

const articlePage = `<!DOCTYPE html>
<html><head>
<title>  Release notes
 for v2 </title>
<style>body { color: red; } .secret-style { display: none }</style>
<script>var tracking = "SCRIPT-PAYLOAD"; document.write("x");</script>
<link rel="stylesheet" href="/a.css">
</head>
<body>
<nav><a href="/">Home</a> | <a href="/about">NAV-LINK</a></nav>
<main>
<h1>Version 2</h1>
<p>The <strong>new</strong> release adds <a href="/docs/start">a guide</a> and fixes bugs.</p>
<ul><li>Faster</li><li>Smaller</li></ul>
<pre><code>go get example.com/v2</code></pre>
<div hidden>HIDDEN-ATTR</div>
<div style="display: none">HIDDEN-STYLE</div>
<p aria-hidden="true">HIDDEN-ARIA</p>
<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk" alt="inline">
<table><tr><th>Field</th><th>Type</th></tr><tr><td>id</td><td>string</td></tr></table>
<noscript>NOSCRIPT-TEXT</noscript>
<script type="application/ld+json">{"LDJSON": true}</script>
</main>
<footer>FOOTER-TEXT</footer>
<script src="/app.js"></script>
</body></html>`

func TestFetchContent(t *testing.T) {
	long := strings.Repeat("0123456789abcdef\n", 3000)
	sjis, err := japanese.ShiftJIS.NewEncoder().String("<html><head><meta charset=\"shift_jis\"><title>ツール</title></head><body><p>ランタイムの説明</p></body></html>")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/article":
			ok(w, "text/html; charset=utf-8", articlePage)
		case "/json":
			ok(w, "application/json", `{"name":"worker","tags":["a","b"],"n":1}`)
		case "/problem":
			ok(w, "application/problem+json", `{"title":"x"}`)
		case "/text":
			ok(w, "text/plain", "plain text\n  kept as is\n")
		case "/latin1":
			ok(w, "text/plain; charset=iso-8859-1", "caf\xe9")
		case "/sjis":
			ok(w, "text/html", sjis)
		case "/untyped-text":
			w.Header()["Content-Type"] = nil
			_, _ = w.Write([]byte("no type, but text"))
		case "/png":
			ok(w, "image/png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
		case "/disguised":
			ok(w, "application/octet-stream", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
		case "/pdf":
			ok(w, "application/pdf", "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
		case "/nul":
			ok(w, "text/plain", "text\x00with\x00nuls")
		case "/long":
			ok(w, "text/plain", long)
		case "/missing":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("<html><body><h1>Not here</h1></body></html>"))
		}
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, OutputBudget: 8 << 10})
	tests := []struct {
		path         string
		format       string
		want, absent []string
		errKind      tool.Kind
		errHas       string
	}{
		{path: "/article", format: "markdown",
			want: []string{"Title: Release notes for v2\n", "# Version 2", "The **new** release adds [a guide](" + s.URL + "/docs/start)", "- Faster", "go get example.com/v2", "| Field | Type   |", "| id    | string |"},
			absent: []string{"SCRIPT-PAYLOAD", "document.write", "color: red", "secret-style", "NAV-LINK", "FOOTER-TEXT", "HIDDEN-ATTR", "HIDDEN-STYLE", "HIDDEN-ARIA",
				"base64", "NOSCRIPT-TEXT", "LDJSON", "app.js"}},
		{path: "/json", format: "json", want: []string{"{\n  \"name\": \"worker\",\n  \"tags\": [\n    \"a\","}},
		{path: "/problem", format: "json", want: []string{"\"title\": \"x\""}},
		{path: "/text", format: "text", want: []string{"plain text\n  kept as is\n"}},
		{path: "/latin1", format: "text", want: []string{"café"}},
		{path: "/sjis", format: "markdown", want: []string{"Title: ツール", "ランタイムの説明"}},
		{path: "/untyped-text", format: "text", want: []string{"no type, but text"}},
		// Images and PDFs, by their bytes, come back as media (TestFetchMedia).
		{path: "/png", want: []string{"An image (image/png), 16 bytes."}},
		{path: "/disguised", want: []string{"An image (image/png), 16 bytes."}},
		{path: "/pdf", want: []string{"A PDF file, 15 bytes."}},
		{path: "/nul", errKind: tool.ToolError, errHas: "binary"},
		{path: "/missing", errKind: tool.ToolError, errHas: "404 Not Found", want: []string{"Status: 404", "# Not here"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, err := fetch(t, c, s.URL+tt.path)
			if tt.errKind != "" {
				if kindOf(err) != tt.errKind || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err = %v, want %s saying %q", err, tt.errKind, tt.errHas)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.Content, w) {
					t.Errorf("lacks %q:\n%s", w, res.Content)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(res.Content, a) {
					t.Errorf("has %q:\n%s", a, res.Content)
				}
			}
			if tt.format != "" {
				if d := fetchDetails(t, res); d.Format != tt.format || d.Status != 200 || d.Bytes == 0 {
					t.Errorf("details %+v", d)
				}
			}
		})
	}
}

// A page longer than the budget is read in parts with offset; the parts
// join up to the whole text.
func TestFetchPaging(t *testing.T) {
	const budget = 4 << 10
	var full strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&full, "line %04d é\n", i)
	}
	s := newServer(t, func(w http.ResponseWriter, _ *http.Request) { ok(w, "text/plain; charset=utf-8", full.String()) })
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, OutputBudget: budget})
	var got strings.Builder
	offset, calls := 0, 0
	for {
		res, err := fetchCtx(t, context.Background(), c, map[string]any{"url": s.URL, "offset": offset})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Content) > budget {
			t.Fatalf("answer of %d bytes, over the budget", len(res.Content))
		}
		d := fetchDetails(t, res)
		_, body, _ := strings.Cut(res.Content, "\n\n")
		got.WriteString(body[:d.Returned])
		offset += d.Returned
		calls++
		if offset >= d.TextBytes {
			break
		}
		if !strings.Contains(res.Content, fmt.Sprintf("call web_fetch again with offset=%d", offset)) {
			t.Fatalf("the answer does not say how to read on:\n%s", res.Content[len(res.Content)-300:])
		}
		if calls > 100 {
			t.Fatal("no progress")
		}
	}
	if got.String() != full.String() {
		t.Errorf("the parts do not join up to the page (%d of %d bytes)", got.Len(), full.Len())
	}
	if _, err := fetchCtx(t, context.Background(), c, map[string]any{"url": s.URL, "offset": full.Len() + 1}); kindOf(err) != tool.InvalidArguments {
		t.Errorf("offset past the end: %v", err)
	}
}

// A huge (endless) body is read up to the limit; the answer says so.
func TestFetchHugeBody(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		chunk := bytes.Repeat([]byte("all work and no play\n"), 4096)
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, MaxBytes: 1 << 20})
	res, err := fetch(t, c, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	d := fetchDetails(t, res)
	if !d.BodyTruncated || d.Bytes != 1<<20 || !d.Truncated || len(res.Content) > web.DefaultOutputBudget {
		t.Errorf("details %+v, content %d bytes", d, len(res.Content))
	}
	if !strings.Contains(res.Content, "only its first 1.0 MiB were read") {
		t.Errorf("the answer does not say the page was cut:\n%s", res.Content[len(res.Content)-300:])
	}
}

// A server that does not answer, or answers a byte at a time, ends at the
// fetch's time limit with kind timeout.
func TestFetchSlowServer(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/trickle" {
			w.Header().Set("Content-Type", "text/plain")
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-tick.C:
				case <-r.Context().Done():
					return
				}
			}
		}
		<-r.Context().Done() // never answers
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, Timeout: 300 * time.Millisecond})
	for _, path := range []string{"/silent", "/trickle"} {
		_, err := fetch(t, c, s.URL+path)
		if kindOf(err) != tool.Timeout || !strings.Contains(err.Error(), "within 300ms") {
			t.Errorf("%s: err = %v, want kind timeout", path, err)
		}
	}
}

// Aborting the call ends the fetch at once with the abort's cause.
func TestFetchAbort(t *testing.T) {
	started := make(chan struct{})
	s := newServer(t, func(_ http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		<-started
		cancel(errors.New("turn cancelled"))
	}()
	_, err := fetchCtx(t, ctx, c, map[string]any{"url": s.URL})
	if err == nil || !strings.Contains(err.Error(), "turn cancelled") {
		t.Errorf("err = %v, want the abort's cause", err)
	}
}

func TestFetchRedirectLimits(t *testing.T) {
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}
	})
	c := newWeb(t, web.Config{Fetch: true, Allow: []string{"127.0.0.1"}, MaxRedirects: 3})
	if _, err := fetch(t, c, s.URL+"/loop"); kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "redirected more than 3 times") {
		t.Errorf("loop: %v", err)
	}
	if n := s.hits.Load(); n != 4 {
		t.Errorf("the server saw %d requests, want 4 (the first and 3 redirects)", n)
	}
	if _, err := fetch(t, c, s.URL+"/file"); kindOf(err) != tool.ToolError || !strings.Contains(err.Error(), "not http or https") {
		t.Errorf("redirect to file: %v", err)
	}
}

func TestFetchBadURLs(t *testing.T) {
	c := newWeb(t, web.Config{Fetch: true})
	for _, u := range []string{"file:///etc/passwd", "ftp://example.com/x", "gopher://example.com", "http://", "javascript:alert(1)"} {
		if _, err := fetch(t, c, u); kindOf(err) != tool.InvalidArguments {
			t.Errorf("%s: %v, want invalid_arguments", u, err)
		}
	}
}

func TestFetchActivity(t *testing.T) {
	c := newWeb(t, web.Config{Fetch: true})
	inv, err := tools.Prepare(webTool(t, c, web.FetchName), `{"url":"https://example.com/docs/page?x=1"}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Activity != "Fetching example.com/docs/page" {
		t.Errorf("activity %q", inv.Activity)
	}
	done := inv.CompletedActivity(tool.Result{Details: &web.FetchDetails{Status: 200, Bytes: 2048}})
	if done != "Fetched example.com/docs/page (200, 2.0 KiB)" {
		t.Errorf("completed activity %q", done)
	}
	if sp := inv.Tool.Spec(); !sp.ReadOnly || sp.ExecutionMode != tool.Parallel {
		t.Errorf("spec %+v", sp)
	}
}
