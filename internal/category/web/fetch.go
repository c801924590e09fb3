package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/netguard"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// FetchParams are web_fetch's parameters.
type FetchParams struct {
	URL    string `json:"url" jsonschema:"description=The http or https URL to fetch.,minLength=1,maxLength=4096"`
	Offset int    `json:"offset,omitempty" jsonschema:"description=Where to start in the page's text\\, in bytes: to read on after an answer that was cut.,minimum=0"`
}

// FetchDetails are web_fetch's details.
type FetchDetails struct {
	URL         string   `json:"url"`
	FinalURL    string   `json:"final_url,omitempty"`
	Redirects   []string `json:"redirects,omitempty"`
	Status      int      `json:"status,omitempty"`
	ContentType string   `json:"content_type,omitempty"`
	// Format is how the body was turned into text: markdown (HTML), json
	// or text.
	Format string `json:"format,omitempty"`
	Title  string `json:"title,omitempty"`
	// Bytes is the body bytes read; BodyTruncated says the body was
	// longer than the worker reads.
	Bytes         int64 `json:"bytes"`
	BodyTruncated bool  `json:"body_truncated,omitempty"`
	// TextBytes is the size of the text made from the body; Offset and
	// Returned say which part of it the model got.
	TextBytes int `json:"text_bytes"`
	Offset    int `json:"offset,omitempty"`
	Returned  int `json:"returned"`
	// Truncated: the model did not get all of the page.
	Truncated  bool  `json:"truncated"`
	DurationMS int64 `json:"duration_ms"`
}

var (
	errFetchTimeout      = errors.New("the fetch's time limit passed")
	errTooManyRedirects  = errors.New("too many redirects")
	errRedirectScheme    = errors.New("redirect to a URL that is not http or https")
	errUnsupportedScheme = errors.New("only http and https URLs can be fetched")
)

type redirectsKey struct{}

// newClient is web_fetch's client: every connection, redirects included,
// is dialed through the guard; no proxy from the environment is used (it
// would be dialed instead of the checked address).
func newClient(cfg Config, g *netguard.Guard) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > cfg.MaxRedirects {
				return fmt.Errorf("%w: stopped after %d", errTooManyRedirects, cfg.MaxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: %s", errRedirectScheme, req.URL.Redacted())
			}
			if r, ok := req.Context().Value(redirectsKey{}).(*[]string); ok {
				*r = append(*r, req.URL.Redacted())
			}
			return nil
		},
	}
}

func (c *Category) fetchTool() *tool.Tool {
	return tool.Must(tool.Def[FetchParams]{
		Spec: tool.Spec{Name: FetchName, ReadOnly: true, Timeout: c.cfg.Timeout + 5*time.Second,
			Description: fmt.Sprintf("Fetch a web page (HTTP GET) and read it as text: HTML comes back as Markdown without scripts and styles, JSON pretty-printed, plain text as is; "+
				"an image (PNG, JPEG, GIF, WebP) or a PDF comes back whole for you to see, an image scaled down when it is large; other binary files are refused. "+
				"At most %s of text per call; a longer page says which offset reads on. Private and local network addresses cannot be fetched.", textclip.ByteCount(int64(c.cfg.OutputBudget)))},
		Activity: func(p FetchParams) string { return "Fetching " + hostPath(p.URL) },
		CompletedActivity: func(p FetchParams, r tool.Result) string {
			if d, ok := r.Details.(*FetchDetails); ok && d.Status != 0 {
				return fmt.Sprintf("Fetched %s (%d, %s)", hostPath(p.URL), d.Status, textclip.ByteCount(d.Bytes))
			}
			return "Fetched " + hostPath(p.URL)
		},
		Execute: c.fetch,
	})
}

// hostPath is a URL's host and path, cut short, for labels.
func hostPath(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		return textclip.Runes(raw, 60)
	}
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	return textclip.Runes(u.Host+p, 60)
}

// target parses the URL the model gave. A URL without a scheme is taken
// as https.
func target(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, tool.Errorf(tool.InvalidArguments, "%q is not a URL: %v", raw, errors.Unwrap(err))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, tool.Errorf(tool.InvalidArguments, "%s: %v.", u.Redacted(), errUnsupportedScheme)
	}
	if u.Hostname() == "" {
		return nil, tool.Errorf(tool.InvalidArguments, "%q has no host.", raw)
	}
	u.Fragment = ""
	return u, nil
}

func (c *Category) fetch(ctx context.Context, p FetchParams) (tool.Result, error) {
	u, err := target(p.URL)
	if err != nil {
		return tool.Result{}, err
	}
	start := time.Now()
	d := &FetchDetails{URL: u.Redacted(), Offset: p.Offset}
	res := tool.Result{Details: d}
	fctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errFetchTimeout)
	defer cancel()
	fctx = context.WithValue(fctx, redirectsKey{}, &d.Redirects)
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return res, tool.Errorf(tool.InvalidArguments, "%s cannot be requested: %v", u.Redacted(), err)
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/json;q=0.9,text/plain;q=0.8,*/*;q=0.5")
	resp, err := c.client.Do(req)
	if err != nil {
		d.DurationMS = time.Since(start).Milliseconds()
		return res, c.fetchError(ctx, fctx, u, err)
	}
	defer resp.Body.Close()
	d.FinalURL, d.Status = resp.Request.URL.Redacted(), resp.StatusCode
	d.ContentType = resp.Header.Get("Content-Type")

	body := bufio.NewReaderSize(resp.Body, 4096)
	head, _ := body.Peek(512)
	if kind := media.Sniff(head); kind != "" {
		// An image or a PDF, by its bytes: for the model to see.
		return c.fetchMedia(ctx, fctx, u, p, resp, body, kind, res, start)
	}
	format, mtype := classify(d.ContentType, head)
	if format == "" {
		d.DurationMS = time.Since(start).Milliseconds()
		size := "size unknown"
		if resp.ContentLength >= 0 {
			size = textclip.ByteCount(resp.ContentLength)
		}
		return res, tool.Errorf(tool.ToolError,
			"%s is %s (%s), a binary format: web_fetch reads HTML, JSON, text, images (PNG, JPEG, GIF, WebP) and PDF files. Look for an HTML or text version of it.", d.FinalURL, mtype, size)
	}
	d.Format = format
	data, err := io.ReadAll(io.LimitReader(body, c.cfg.MaxBytes+1))
	d.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		return res, c.fetchError(ctx, fctx, u, err)
	}
	if int64(len(data)) > c.cfg.MaxBytes {
		data, d.BodyTruncated = data[:c.cfg.MaxBytes], true
	}
	d.Bytes = int64(len(data))

	text, err := c.render(fctx, format, d, data)
	if err != nil {
		return res, c.fetchError(ctx, fctx, u, err)
	}
	d.TextBytes = len(text)
	if p.Offset > 0 && p.Offset >= len(text) {
		return res, tool.Errorf(tool.InvalidArguments, "offset %d is past the end of the page's text (%d bytes).", p.Offset, len(text))
	}
	res.Content = c.page(d, text, p.Offset)
	if resp.StatusCode >= 400 {
		return res, tool.Errorf(tool.ToolError, "%s answered HTTP %s.", d.FinalURL, resp.Status)
	}
	return res, nil
}

// fetchMedia reads an image or PDF body whole (up to MaxBytes) and returns
// it as media, under the page's header lines; the runtime fits it to the
// media budget (an image scaled down, a PDF that does not fit replaced by
// a note naming the URL).
func (c *Category) fetchMedia(ctx, fctx context.Context, u *url.URL, p FetchParams, resp *http.Response, body io.Reader, kind string, res tool.Result, start time.Time) (tool.Result, error) {
	d := res.Details.(*FetchDetails)
	what, format := "a PDF file", "pdf"
	if media.IsImage(kind) {
		what, format = "an image ("+kind+")", "image"
	}
	d.Format = format
	data, err := io.ReadAll(io.LimitReader(body, c.cfg.MaxBytes+1))
	d.DurationMS = time.Since(start).Milliseconds()
	if err != nil {
		return res, c.fetchError(ctx, fctx, u, err)
	}
	d.Bytes = int64(len(data))
	if int64(len(data)) > c.cfg.MaxBytes {
		d.Bytes, d.BodyTruncated, d.Truncated = c.cfg.MaxBytes, true, true
		return res, tool.Errorf(tool.ToolError, "%s is %s larger than the %s web_fetch reads, so it was not read.", d.FinalURL, what, textclip.ByteCount(c.cfg.MaxBytes))
	}
	if p.Offset > 0 {
		return res, tool.Errorf(tool.InvalidArguments, "%s is %s, which comes back whole: call web_fetch without offset.", d.FinalURL, what)
	}
	line := fmt.Sprintf("%s, %s.", strings.ToUpper(what[:1])+what[1:], textclip.ByteCount(d.Bytes))
	if info, err := media.Probe(data); err == nil {
		line = fmt.Sprintf("%s, %d×%d pixels, %s.", strings.ToUpper(what[:1])+what[1:], info.Width, info.Height, textclip.ByteCount(d.Bytes))
	}
	res.Content = c.page(d, line, 0)
	name := ""
	if base := path.Base(resp.Request.URL.Path); kind == media.PDF && strings.HasSuffix(strings.ToLower(base), ".pdf") {
		name = base
	}
	res.Media = []tool.Media{{MIMEType: kind, Data: data, Filename: name, Source: d.FinalURL}}
	if resp.StatusCode >= 400 {
		return res, tool.Errorf(tool.ToolError, "%s answered HTTP %s.", d.FinalURL, resp.Status)
	}
	return res, nil
}

// page lays out what the model reads: a few header lines, then the
// part of text that fits the budget from offset on, then notes.
func (c *Category) page(d *FetchDetails, text string, offset int) string {
	var h strings.Builder
	fmt.Fprintf(&h, "URL: %s\n", d.FinalURL)
	if d.FinalURL != d.URL {
		fmt.Fprintf(&h, "(redirected from %s)\n", d.URL)
	}
	if d.Status != http.StatusOK {
		fmt.Fprintf(&h, "Status: %d %s\n", d.Status, http.StatusText(d.Status))
	}
	if d.Title != "" {
		fmt.Fprintf(&h, "Title: %s\n", textclip.Runes(oneLine(d.Title), 200))
	}
	h.WriteString("\n")
	room := max(c.cfg.OutputBudget-h.Len()-noteReserve, 0)
	part := text[offset:]
	part = textclip.Head(part, room)
	d.Returned = len(part)
	end := offset + len(part)
	d.Truncated = d.BodyTruncated || offset > 0 || end < len(text)
	var b strings.Builder
	b.WriteString(h.String())
	if part == "" && len(text) == 0 {
		b.WriteString("(the page has no text)\n")
	}
	b.WriteString(part)
	if !strings.HasSuffix(part, "\n") && part != "" {
		b.WriteByte('\n')
	}
	if end < len(text) {
		fmt.Fprintf(&b, "\n[cut: bytes %d–%d of the page's %s of text shown; call web_fetch again with offset=%d to read on]\n", offset, end, textclip.ByteCount(int64(len(text))), end)
	}
	if d.BodyTruncated {
		fmt.Fprintf(&b, "[the page is larger than %s; only its first %s were read]\n", textclip.ByteCount(d.Bytes), textclip.ByteCount(d.Bytes))
	}
	return b.String()
}

// render turns the body into text by format, decoding the charset the
// server declared (or the page's meta tag) into UTF-8.
func (c *Category) render(ctx context.Context, format string, d *FetchDetails, data []byte) (string, error) {
	switch format {
	case "markdown":
		title, md, err := toMarkdown(ctx, c.md, decode(data, d.ContentType, true), d.FinalURL)
		if err != nil {
			return "", err
		}
		d.Title = title
		return md, nil
	case "json":
		var b bytes.Buffer
		if err := json.Indent(&b, data, "", "  "); err == nil {
			return b.String(), nil
		}
		return strings.ToValidUTF8(string(data), "\uFFFD"), nil
	default:
		return decode(data, d.ContentType, false), nil
	}
}

// decode returns data as UTF-8 text. A charset is taken from a byte
// order mark, the Content-Type header, or (HTML) the page's meta tag;
// without one, UTF-8 is assumed when the bytes are valid UTF-8.
func decode(data []byte, contentType string, isHTML bool) string {
	enc, name, certain := charset.DetermineEncoding(data, contentType)
	if name == "utf-8" || !certain && (!isHTML || name == "windows-1252") && utf8.Valid(data) {
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	out, err := enc.NewDecoder().Bytes(data)
	if err != nil {
		return strings.ToValidUTF8(string(data), "\uFFFD")
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// classify decides how a body is read from its Content-Type, sniffing
// the first bytes when the type is missing or generic: "markdown" (HTML),
// "json", "text", or "" for binary. media is the type it went by.
func classify(contentType string, head []byte) (format, media string) {
	media, _, _ = mime.ParseMediaType(contentType)
	media = strings.ToLower(media)
	if media == "" || media == "application/octet-stream" || media == "binary/octet-stream" || media == "application/unknown" {
		media, _, _ = mime.ParseMediaType(http.DetectContentType(head))
	}
	switch {
	case media == "text/html" || media == "application/xhtml+xml":
		format = "markdown"
	case media == "application/json" || strings.HasSuffix(media, "+json") || media == "application/x-ndjson":
		format = "json"
	case strings.HasPrefix(media, "text/") || textual[media] || strings.HasSuffix(media, "+xml"):
		format = "text"
	default:
		return "", media
	}
	if bytes.IndexByte(head, 0) >= 0 && !utf16BOM(head) {
		return "", media + " with binary content"
	}
	return format, media
}

func utf16BOM(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0xFE, 0xFF}) || bytes.HasPrefix(b, []byte{0xFF, 0xFE})
}

// textual are the non-text/* media types read as text.
var textual = map[string]bool{
	"application/xml":          true,
	"application/javascript":   true,
	"application/x-javascript": true,
	"application/ecmascript":   true,
	"application/x-yaml":       true,
	"application/yaml":         true,
	"application/toml":         true,
	"application/x-sh":         true,
	"application/sql":          true,
	"application/graphql":      true,
	"application/x-httpd-php":  true,
	"application/rss+xml":      true,
	"application/atom+xml":     true,
}

// fetchError words a failed fetch for the model. ctx is the call's,
// fctx the fetch's own (with its time limit).
func (c *Category) fetchError(ctx, fctx context.Context, u *url.URL, err error) error {
	var blocked *netguard.BlockedError
	var dnsErr *net.DNSError
	switch {
	case ctx.Err() != nil:
		return context.Cause(ctx)
	case errors.As(err, &blocked):
		return tool.Errorf(tool.ToolError,
			"Refused to fetch %s: %v. web_fetch does not reach loopback, private, link-local (cloud metadata), multicast or other non-public addresses, directly or through a redirect.",
			u.Redacted(), blocked)
	case context.Cause(fctx) == errFetchTimeout:
		return tool.Errorf(tool.Timeout, "%s did not answer in full within %s.", u.Redacted(), c.cfg.Timeout)
	case isTimeout(err):
		return tool.Errorf(tool.Timeout, "Fetching %s timed out: %v.", u.Redacted(), unwrapURL(err))
	case errors.Is(err, errTooManyRedirects):
		return tool.Errorf(tool.ToolError, "%s redirected more than %d times; stopped.", u.Redacted(), c.cfg.MaxRedirects)
	case errors.Is(err, errRedirectScheme):
		return tool.Errorf(tool.ToolError, "%s: %v.", u.Redacted(), err)
	case errors.As(err, &dnsErr):
		return tool.Errorf(tool.ToolError, "Could not fetch %s: the host name %s could not be resolved.", u.Redacted(), dnsErr.Name)
	}
	return tool.Errorf(tool.ToolError, "Could not fetch %s: %v.", u.Redacted(), unwrapURL(err))
}

// unwrapURL drops the *url.Error wrapper, which repeats the URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
