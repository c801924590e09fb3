package brain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that enables the category.
const Binding = "brain"

// Bucket is the key-value bucket of the pages.
const Bucket = "BRAIN"

// Names of the tools, in catalog order.
const (
	RecallName     = "recall"
	GetPageName    = "get_page"
	ListPagesName  = "list_pages"
	WritePageName  = "write_page"
	DeletePageName = "delete_page"
)

// Defaults of a zero Config.
const (
	DefaultMaxPageBytes = 64 << 10
	DefaultMaxPages     = 2000
	DefaultCacheBytes   = 256 << 20
	DefaultReadLines    = 200
	MaxReadLines        = 2000
	// maxReadBytes bounds one get_page answer; the rest is a later range.
	maxReadBytes = 32 << 10
	snippetWidth = 200
)

// Config configures the category. The zero value of each field works.
type Config struct {
	// Replicas and Storage of the BRAIN bucket (1, file).
	Replicas int
	Storage  jetstream.StorageType
	// MaxPageBytes bounds one page's body (64 KiB).
	MaxPageBytes int
	// MaxPages bounds the pages of one agent (2000).
	MaxPages int
	// CacheBytes bounds the search indexes this worker keeps in memory
	// (256 MiB); they are a cache of the bucket, rebuilt when evicted.
	CacheBytes int
	// K1 and B are the BM25 parameters (1.2 and 0.75).
	K1, B float64
}

// Brain is the brain category over the BRAIN bucket. It is safe for
// concurrent use; every worker of a fleet has its own over one bucket.
type Brain struct {
	cfg      Config
	kv       jetstream.KeyValue
	cache    *cache
	all      []*tool.Tool
	readOnly []*tool.Tool
}

// New creates or updates the BRAIN bucket and builds the tools.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Brain, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.MaxPageBytes <= 0 {
		cfg.MaxPageBytes = DefaultMaxPageBytes
	}
	if cfg.MaxPages <= 0 {
		cfg.MaxPages = DefaultMaxPages
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = DefaultCacheBytes
	}
	if cfg.K1 == 0 {
		cfg.K1 = DefaultK1
	}
	if cfg.B == 0 {
		cfg.B = DefaultB
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: Bucket, Description: "Brain pages, per agent", History: 1,
		Replicas: cfg.Replicas, Storage: cfg.Storage,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", Bucket, err)
	}
	// Every read and write has a short attempt timeout, not the call's,
	// and transient failures are tried again; a page written again after
	// a lost answer is recognised by its value (it carries its time and
	// call).
	r := bus.Retry{}
	kv = r.KV(js, kv)
	b := &Brain{cfg: cfg, kv: kv, cache: newCache(kv, r, cfg.CacheBytes)}
	b.all = b.build()
	b.readOnly = b.all[:2]
	return b, nil
}

// Category returns the category: in a main turn that binds "brain", all
// five tools; in a workflow task turn that binds it, only recall and
// get_page; otherwise nothing.
func (b *Brain) Category() tool.Category {
	return tool.Category{Name: Binding, Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		switch {
		case !t.Bound(Binding):
			return nil, nil
		case t.Kind == protocol.KindText:
			return b.all, nil
		}
		return b.readOnly, nil
	}}
}

// RecallParams are recall's parameters.
type RecallParams struct {
	Query string `json:"query" jsonschema:"description=What you are looking for: words that would appear in the page.,minLength=1,maxLength=500"`
	Limit int    `json:"limit,omitempty" jsonschema:"description=How many pages to return\\, best first (default 5).,minimum=1,maximum=20"`
}

// GetPageParams are get_page's parameters.
type GetPageParams struct {
	Page   string `json:"page" jsonschema:"description=The page's title\\, as recall or list_pages gave it.,minLength=1,maxLength=200"`
	Offset int    `json:"offset,omitempty" jsonschema:"description=The first line to return\\, counting from 1 (default 1).,minimum=1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=How many lines to return (default 200).,minimum=1,maximum=2000"`
}

// ListPagesParams are list_pages' parameters.
type ListPagesParams struct {
	Prefix string `json:"prefix,omitempty" jsonschema:"description=Only pages whose title starts with this (case-insensitive).,maxLength=200"`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=How many to list\\, by title (default 50).,minimum=1,maximum=500"`
}

// WritePageParams are write_page's parameters.
type WritePageParams struct {
	Page    string `json:"page" jsonschema:"description=The page's title: it names the page. An existing title is overwritten (or appended to).,minLength=1,maxLength=200"`
	Content string `json:"content" jsonschema:"description=The page's text (markdown)."`
	Mode    string `json:"mode,omitempty" jsonschema:"description=replace (default) sets the page to content; append adds content at its end (creating it if needed).,enum=replace,enum=append"`
}

// DeletePageParams are delete_page's parameters.
type DeletePageParams struct {
	Page string `json:"page" jsonschema:"description=The title of the page to delete.,minLength=1,maxLength=200"`
}

func (b *Brain) build() []*tool.Tool {
	return []*tool.Tool{
		tool.Must(tool.Def[RecallParams]{
			Spec: tool.Spec{Name: RecallName, ReadOnly: true,
				Description: "Search your brain (the pages you have kept across turns) by words, ranked by relevance, with the matching lines. " +
					"Read a page found this way with get_page."},
			Activity:          func(p RecallParams) string { return "Recalling " + textclip.Runes(p.Query, 60) },
			CompletedActivity: func(p RecallParams, r tool.Result) string { return recallLabel(p, r) },
			Execute:           b.recall,
		}),
		tool.Must(tool.Def[GetPageParams]{
			Spec: tool.Spec{Name: GetPageName, ReadOnly: true,
				Description: "Read a page of your brain by its title. Long pages come in ranges of lines: the answer says which lines it holds and where to go on."},
			Activity: func(p GetPageParams) string { return "Reading page " + textclip.Runes(p.Page, 60) },
			Execute:  b.getPage,
		}),
		tool.Must(tool.Def[ListPagesParams]{
			Spec:     tool.Spec{Name: ListPagesName, ReadOnly: true, Description: "List the pages of your brain by title, with their size and when they were last written."},
			Activity: func(ListPagesParams) string { return "Listing pages" },
			Execute:  b.listPages,
		}),
		tool.Must(tool.Def[WritePageParams]{
			Spec: tool.Spec{Name: WritePageName, ExecutionMode: tool.Sequential,
				Description: "Write a page to your brain: what you want to know again in later turns (facts, decisions, notes, how-tos). " +
					"One page per topic, titled so you will recognise it. Replaces the page with the same title, or appends to it."},
			Activity: func(p WritePageParams) string { return "Writing page " + textclip.Runes(p.Page, 60) },
			Execute:  b.writePage,
		}),
		tool.Must(tool.Def[DeletePageParams]{
			Spec:     tool.Spec{Name: DeletePageName, Destructive: true, ExecutionMode: tool.Sequential, Description: "Delete a page of your brain. This cannot be undone."},
			Activity: func(p DeletePageParams) string { return "Deleting page " + textclip.Runes(p.Page, 60) },
			Execute:  b.deletePage,
		}),
	}
}

// Hit is one page recall found.
type Hit struct {
	Title     string    `json:"title"`
	Score     float64   `json:"score"`
	Lines     int       `json:"lines"`
	UpdatedAt time.Time `json:"updated_at"`
	Snippets  []Snippet `json:"snippets"`
}

// Search ranks an agent's pages for query by BM25, best first, at most
// limit of them, each with up to two snippets.
func (b *Brain) Search(ctx context.Context, agentID, query string, limit int) ([]Hit, error) {
	terms := queryTerms(query)
	var out []Hit
	err := b.cache.with(ctx, agentID, func(c *corpus) error {
		hits := c.search(terms, b.cfg.K1, b.cfg.B)
		if len(hits) > limit {
			hits = hits[:limit]
		}
		for _, h := range hits {
			out = append(out, Hit{
				Title: h.doc.title, Score: h.score, Lines: len(splitLines(h.doc.body)), UpdatedAt: h.doc.updated,
				Snippets: c.snippets(h.doc, terms, 2, snippetWidth),
			})
		}
		return nil
	})
	return out, err
}

func (b *Brain) recall(ctx context.Context, p RecallParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if p.Limit == 0 {
		p.Limit = 5
	}
	if len(queryTerms(p.Query)) == 0 {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "The query %q has no words to search for; use words that would appear in the page.", p.Query)
	}
	hits, err := b.Search(ctx, call.AgentID, p.Query, p.Limit)
	if err != nil {
		return tool.Result{}, err
	}
	if len(hits) == 0 {
		return tool.Result{Content: fmt.Sprintf("No page matches %q. Try other words, or list_pages to see every title.", p.Query), Details: hits}, nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d page%s match %q, best first:", len(hits), tools.Plural(len(hits)), p.Query)
	for i, h := range hits {
		fmt.Fprintf(&sb, "\n%d. %q (%d lines, updated %s, score %.2f)", i+1, h.Title, h.Lines, h.UpdatedAt.Format(time.DateOnly), h.Score)
		for _, s := range h.Snippets {
			fmt.Fprintf(&sb, "\n   line %d: %s", s.Line, s.Text)
		}
	}
	sb.WriteString("\nRead one with get_page (offset = a line number to start there).")
	return tool.Result{Content: sb.String(), Details: hits}, nil
}

func recallLabel(p RecallParams, r tool.Result) string {
	if hits, ok := r.Details.([]Hit); ok {
		return fmt.Sprintf("Recalled %d page%s for %s", len(hits), tools.Plural(len(hits)), textclip.Runes(p.Query, 60))
	}
	return "Recalling " + textclip.Runes(p.Query, 60)
}

// load reads a page; nil when there is none with that exact title.
func (b *Brain) load(ctx context.Context, agentID, title string) (*Page, uint64, error) {
	e, err := b.kv.Get(ctx, Key(agentID, title))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading page %q: %w", title, err)
	}
	var p Page
	if err := json.Unmarshal(e.Value(), &p); err != nil {
		return nil, 0, fmt.Errorf("page %q is unreadable: %w", title, err)
	}
	return &p, e.Revision(), nil
}

// resolve finds the page a title means: the exact title, else the one
// title equal to it ignoring case. Otherwise it returns an error that
// names the closest titles.
func (b *Brain) resolve(ctx context.Context, agentID, title string) (*Page, uint64, error) {
	t, err := normTitle(title)
	if err != nil {
		return nil, 0, tool.Errorf(tool.InvalidArguments, "%v.", err)
	}
	p, rev, err := b.load(ctx, agentID, t)
	if p != nil || err != nil {
		return p, rev, err
	}
	var folded []string
	var similar []string
	err = b.cache.with(ctx, agentID, func(c *corpus) error {
		for _, d := range c.docs {
			if strings.EqualFold(d.title, t) {
				folded = append(folded, d.title)
			}
		}
		for _, h := range c.search(queryTerms(t), b.cfg.K1, b.cfg.B) {
			if len(similar) == 3 {
				break
			}
			similar = append(similar, fmt.Sprintf("%q", h.doc.title))
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if len(folded) == 1 {
		return b.load(ctx, agentID, folded[0])
	}
	msg := fmt.Sprintf("There is no page titled %q.", t)
	if len(similar) > 0 {
		msg += " Similar titles: " + strings.Join(similar, ", ") + "."
	} else {
		msg += " recall searches by words; list_pages shows every title."
	}
	return nil, 0, tool.Errorf(tool.ToolError, "%s", msg)
}

func (b *Brain) getPage(ctx context.Context, p GetPageParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	page, _, err := b.resolve(ctx, call.AgentID, p.Page)
	if err != nil {
		return tool.Result{}, err
	}
	offset, limit := max(p.Offset, 1), p.Limit
	if limit == 0 {
		limit = DefaultReadLines
	}
	lines := splitLines(page.Body)
	total := len(lines)
	head := fmt.Sprintf("Page %q (%d lines, updated %s)", page.Title, total, page.UpdatedAt.Format(time.RFC3339))
	if total == 0 {
		return tool.Result{Content: head + " is empty."}, nil
	}
	if offset > total {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "%s: offset %d is past its last line; use an offset from 1 to %d.", head, offset, total)
	}
	var body strings.Builder
	end := offset - 1
	for end < total && end-offset+1 < limit {
		l := lines[end]
		if body.Len() > 0 && body.Len()+len(l)+1 > maxReadBytes {
			break
		}
		if body.Len() > 0 {
			body.WriteByte('\n')
		}
		body.WriteString(l)
		end++
	}
	var sb strings.Builder
	if offset == 1 && end == total {
		sb.WriteString(head + ":\n")
	} else {
		fmt.Fprintf(&sb, "%s, lines %d-%d:\n", head, offset, end)
	}
	sb.WriteString(body.String())
	if end < total {
		fmt.Fprintf(&sb, "\n[Lines %d-%d follow: get_page with offset %d.]", end+1, total, end+1)
	}
	details := map[string]any{"title": page.Title, "lines": total, "from": offset, "to": end}
	return tool.Result{Content: sb.String(), Details: details}, nil
}

// PageInfo is one page as list_pages shows it.
type PageInfo struct {
	Title     string    `json:"title"`
	Lines     int       `json:"lines"`
	Bytes     int       `json:"bytes"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (b *Brain) listPages(ctx context.Context, p ListPagesParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	if p.Limit == 0 {
		p.Limit = 50
	}
	prefix := strings.ToLower(strings.TrimSpace(p.Prefix))
	var pages []PageInfo
	total := 0
	err = b.cache.with(ctx, call.AgentID, func(c *corpus) error {
		total = len(c.docs)
		for _, d := range c.docs {
			if strings.HasPrefix(strings.ToLower(d.title), prefix) {
				pages = append(pages, PageInfo{Title: d.title, Lines: len(splitLines(d.body)), Bytes: len(d.body), UpdatedAt: d.updated})
			}
		}
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	sort.Slice(pages, func(i, j int) bool {
		a, z := strings.ToLower(pages[i].Title), strings.ToLower(pages[j].Title)
		if a != z {
			return a < z
		}
		return pages[i].Title < pages[j].Title
	})
	matched := len(pages)
	if len(pages) > p.Limit {
		pages = pages[:p.Limit]
	}
	if matched == 0 {
		if total == 0 {
			return tool.Result{Content: "Your brain has no pages yet; write_page keeps one.", Details: pages}, nil
		}
		return tool.Result{Content: fmt.Sprintf("No page title starts with %q (there are %d pages).", p.Prefix, total), Details: pages}, nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d of %d page%s", len(pages), matched, tools.Plural(matched))
	if prefix != "" {
		fmt.Fprintf(&sb, " starting with %q", p.Prefix)
	}
	sb.WriteString(":")
	for _, pg := range pages {
		fmt.Fprintf(&sb, "\n- %q (%d lines, updated %s)", pg.Title, pg.Lines, pg.UpdatedAt.Format(time.DateOnly))
	}
	return tool.Result{Content: sb.String(), Details: pages}, nil
}

func (b *Brain) writePage(ctx context.Context, p WritePageParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	title, err := normTitle(p.Page)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Nothing was written: %v.", err)
	}
	key := Key(call.AgentID, title)
	ref := call.Ref()
	for attempt := 0; ; attempt++ {
		now := time.Now().UTC()
		old, rev, err := b.load(ctx, call.AgentID, title)
		if err != nil {
			return tool.Result{}, err
		}
		page := &Page{Title: title, Body: p.Content, CreatedAt: now, UpdatedAt: now, UpdatedBy: &ref}
		if old != nil {
			page.CreatedAt = old.CreatedAt
			if p.Mode == "append" && old.Body != "" {
				sep := ""
				if !strings.HasSuffix(old.Body, "\n") {
					sep = "\n"
				}
				page.Body = old.Body + sep + p.Content
			}
		} else if err := b.roomForOneMore(ctx, call.AgentID); err != nil {
			return tool.Result{}, err
		}
		if len(page.Body) > b.cfg.MaxPageBytes {
			return tool.Result{}, tool.Errorf(tool.InvalidArguments,
				"Nothing was written: the page would be %d bytes, over the %d byte limit. Split it into several pages.", len(page.Body), b.cfg.MaxPageBytes)
		}
		data, err := json.Marshal(page)
		if err != nil {
			return tool.Result{}, err
		}
		// Create or compare-and-set, so that an append never loses a
		// write that landed in between.
		if old == nil {
			_, err = b.kv.Create(ctx, key, data)
		} else {
			_, err = b.kv.Update(ctx, key, data, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			if attempt < 8 {
				continue
			}
		}
		if err != nil {
			return tool.Result{}, fmt.Errorf("page %q could not be written: %w", title, err)
		}
		verb := "Created"
		switch {
		case old != nil && p.Mode == "append":
			verb = "Appended to"
		case old != nil:
			verb = "Replaced"
		}
		n := len(splitLines(page.Body))
		return tool.Result{
			Content: fmt.Sprintf("%s page %q (%d lines, %d bytes).", verb, title, n, len(page.Body)),
			Details: PageInfo{Title: title, Lines: n, Bytes: len(page.Body), UpdatedAt: page.UpdatedAt},
		}, nil
	}
}

func (b *Brain) roomForOneMore(ctx context.Context, agentID string) error {
	n := 0
	if err := b.cache.with(ctx, agentID, func(c *corpus) error { n = len(c.docs); return nil }); err != nil {
		return err
	}
	if n >= b.cfg.MaxPages {
		return tool.Errorf(tool.ToolError, "Your brain holds %d pages, the most it may; delete or merge pages before writing a new one.", n)
	}
	return nil
}

func (b *Brain) deletePage(ctx context.Context, p DeletePageParams) (tool.Result, error) {
	call, err := tool.AgentCallFrom(ctx)
	if err != nil {
		return tool.Result{}, err
	}
	t, err := normTitle(p.Page)
	if err != nil {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "%v.", err)
	}
	// Only the exact title: a destructive tool does not guess.
	page, rev, err := b.load(ctx, call.AgentID, t)
	if err != nil {
		return tool.Result{}, err
	}
	if page == nil {
		return tool.Result{}, tool.Errorf(tool.ToolError, "There is no page titled %q (titles are matched exactly here; list_pages shows them).", t)
	}
	if err := b.kv.Delete(ctx, Key(call.AgentID, t), jetstream.LastRevision(rev)); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return tool.Result{}, tool.Errorf(tool.ToolError, "Page %q changed while it was being deleted; read it again and decide.", t)
		}
		return tool.Result{}, fmt.Errorf("page %q could not be deleted: %w", t, err)
	}
	return tool.Result{Content: fmt.Sprintf("Deleted page %q.", t)}, nil
}
