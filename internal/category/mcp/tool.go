package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/tool"
)

// toolSet is a server's tools as built from one tool list. Building
// compiles every schema, so a set is reused for as long as the list (and
// the namespace description) stays the same, across sessions.
type toolSet struct {
	hash  [sha256.Size]byte
	tools []*tool.Tool
	// notes name the tools that were left out, and why.
	notes []string
}

// listing is what a turn gets of one server.
type listing struct {
	tools []*tool.Tool
	notes []string
	// needsAccount: the server needs the turn's account connected and
	// no list of it is known (unlisted.go).
	needsAccount bool
}

// listing returns the server's tools for a turn. A server that cannot be
// reached gives a note instead of failing the turn: its tools are those
// of the last list it gave (their calls fail until it is back), or none
// if it never answered.
func (s *server) listing(ctx context.Context) listing {
	ctx, cancel := context.WithTimeout(ctx, 2*s.cfg.connectTimeout())
	defer cancel()
	ts, err := s.toolSet(ctx)
	if err == nil {
		return listing{tools: ts.tools, notes: ts.notes}
	}
	s.buildMu.Lock()
	last := s.built
	if s.lastPrivate {
		// A private list is its owner's; this turn may be another's.
		last = nil
	}
	s.buildMu.Unlock()
	if last == nil && authFailure(err) {
		// This owner cannot list: the list another owner's session
		// kept, if any (listshare.go); its calls end auth_required.
		if ts, lerr := s.sharedTools(ctx); ts != nil && lerr == nil {
			return listing{tools: ts.tools, notes: []string{fmt.Sprintf(
				"%v; its tools are those it lists to connected accounts, and calls to them need the account connected", noteError(s.name, err))}}
		}
	}
	if last == nil {
		var ae *AuthRequiredError
		if errors.As(err, &ae) {
			// No one ever listed it: the turn is offered ConnectTool, and
			// a call of any name of it ends auth_required (unlisted.go).
			return listing{needsAccount: true, notes: []string{fmt.Sprintf(
				"%v; its tools are unknown until then: the turn is offered %s.%s instead, and a call of any of its names needs the account connected", noteError(s.name, err), s.name, ConnectTool)}}
		}
		return listing{notes: []string{fmt.Sprintf("%v; its tools are left out of this turn", noteError(s.name, err))}}
	}
	return listing{tools: last.tools, notes: []string{fmt.Sprintf(
		"%v; its tools are those it listed last, and calls to them fail until it is back", noteError(s.name, err))}}
}

func noteError(name string, err error) error {
	if ae := (*AuthRequiredError)(nil); errors.As(err, &ae) { // auth*.go
		return fmt.Errorf("mcp server %q needs a person to connect an account for this turn's agent (%s)", name, ae.URL)
	}
	var de *DownError
	if errors.As(err, &de) {
		return de
	}
	return fmt.Errorf("mcp server %q is unavailable (%w)", name, err)
}

// toolSet lists the server's tools, from the session's cache while no
// tools/list_changed notification came. A connection found dead is
// replaced once.
func (s *server) toolSet(ctx context.Context) (*toolSet, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.connection(ctx)
		if err != nil {
			return nil, err
		}
		ts, err := s.list(ctx, c)
		if err == nil {
			return ts, nil
		}
		if ctx.Err() != nil || !lost(c, err) {
			return nil, err
		}
		err = c.why(err)
		if attempt > 0 {
			return nil, err
		}
		s.drop(c, err)
	}
}

func (s *server) list(ctx context.Context, c *conn) (*toolSet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	version := s.changes.Load()
	if c.tools != nil && c.version == version && c.cache.fresh(time.Now()) {
		return c.tools, nil
	}
	sctx, span := spans.MCP(ctx, s.name, "tools/list", "")
	list, cut, cacheable, err := s.listPages(sctx, c.cs)
	spans.End(span, err)
	if err != nil {
		return nil, err
	}
	nsDesc := namespaceDescription(s.name, s.cfg, c.cs.InitializeResult())
	ts := s.build(list, cut, nsDesc)
	c.tools, c.version, c.cache = ts, version, cacheOf(c.cs, cacheable, time.Now())
	s.buildMu.Lock()
	s.lastPrivate = c.cache.private
	s.buildMu.Unlock()
	if !c.cache.private && cut == nil {
		s.shareList(list, nsDesc)
	}
	return ts, nil
}

// listCut says why a listing stopped before the server's last page.
type listCut struct {
	Reason              string
	Pages, Tools, Bytes int
}

// listPages reads the server's tool list page by page, within the
// Manager's bounds of pages, tools, bytes and time. Past a bound it stops
// and returns the tools that fit, with the reason (cut non-nil); a time
// bound passed before any tool came is an error.
func (s *server) listPages(ctx context.Context, cs *sdk.ClientSession) (list []*sdk.Tool, cut *listCut, cacheable sdk.Cacheable, err error) {
	list, cut, first, err := s.readPages(ctx, cs)
	if first != nil {
		cacheable = first.Cacheable
	}
	return list, cut, cacheable, err
}

// readPages is listPages, with the first page (for its caching fields).
func (s *server) readPages(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, *listCut, *sdk.ListToolsResult, error) {
	o := s.m.opts
	lctx, cancel := context.WithTimeout(ctx, o.ListTimeout)
	defer cancel()
	var list []*sdk.Tool
	var first *sdk.ListToolsResult
	bytes, pages := 0, 0
	params := &sdk.ListToolsParams{}
	for {
		res, err := cs.ListTools(lctx, params)
		if err != nil {
			// A deadline (this bound's or the listing's), not an abort.
			if errors.Is(lctx.Err(), context.DeadlineExceeded) && len(list) > 0 {
				return list, &listCut{Reason: fmt.Sprintf("listing took longer than %v", o.ListTimeout), Pages: pages, Tools: len(list), Bytes: bytes}, first, nil
			}
			return nil, nil, first, fmt.Errorf("listing tools: %w", err)
		}
		if first == nil {
			first = res
		}
		pages++
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			if len(list) >= o.MaxListTools {
				return list, &listCut{Reason: fmt.Sprintf("it lists more than %d tools", o.MaxListTools), Pages: pages, Tools: len(list), Bytes: bytes}, first, nil
			}
			n := toolBytes(t)
			if bytes+n > o.MaxListBytes {
				return list, &listCut{Reason: fmt.Sprintf("its tool definitions pass %d bytes", o.MaxListBytes), Pages: pages, Tools: len(list), Bytes: bytes}, first, nil
			}
			bytes += n
			list = append(list, t)
		}
		if res.NextCursor == "" {
			return list, nil, first, nil
		}
		if pages >= o.MaxListPages {
			return list, &listCut{Reason: fmt.Sprintf("it gives more than %d pages", o.MaxListPages), Pages: pages, Tools: len(list), Bytes: bytes}, first, nil
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
}

// toolBytes is the size of a tool's definition as JSON.
func toolBytes(t *sdk.Tool) int {
	b, err := json.Marshal(t)
	if err != nil {
		return 0
	}
	return len(b)
}

// build turns a tool list into tools, or returns the set built from the
// same list before.
func (s *server) build(list []*sdk.Tool, cut *listCut, nsDesc string) *toolSet {
	raw, err := json.Marshal(struct {
		Tools     []*sdk.Tool
		Cut       *listCut
		Namespace string
	}{list, cut, nsDesc})
	if err != nil {
		// The SDK decoded these from JSON; they encode again.
		raw = fmt.Appendf(nil, "%p", list)
	}
	h := sha256.Sum256(raw)
	s.buildMu.Lock()
	defer s.buildMu.Unlock()
	if s.built != nil && s.built.hash == h {
		return s.built
	}
	ts := &toolSet{hash: h}
	if cut != nil {
		// Once per new list: the set is reused while the list stays.
		s.log.Warn("mcp tool listing cut short", "reason", cut.Reason, "pages", cut.Pages, "tools", cut.Tools, "bytes", cut.Bytes)
		ts.notes = append(ts.notes, fmt.Sprintf("mcp server %q: its tool list was cut short (%s): only its first %d tools are offered", s.name, cut.Reason, cut.Tools))
	}
	for _, t := range list {
		if s.cfg.Tools[t.Name].Disabled {
			continue
		}
		tool, err := s.newTool(t, nsDesc)
		if err != nil {
			ts.notes = append(ts.notes, fmt.Sprintf("mcp server %q: tool %q is left out: %v", s.name, t.Name, err))
			continue
		}
		ts.tools = append(ts.tools, tool)
	}
	s.built = ts
	return ts
}

// newTool maps one MCP tool onto the contract: its input schema sent and
// enforced as the server gave it, its annotations as flags.
func (s *server) newTool(t *sdk.Tool, nsDesc string) (*tool.Tool, error) {
	schema := json.RawMessage(`{"type":"object"}`)
	if t.InputSchema != nil {
		b, err := json.Marshal(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("input schema: %w", err)
		}
		if len(b) > MaxToolSchema {
			return nil, fmt.Errorf("its input schema is %d bytes, more than the %d a tool may have", len(b), MaxToolSchema)
		}
		schema = b
	}
	out, err := compileOutputSchema(t)
	if err != nil {
		return nil, err
	}
	readOnly, destructive := hints(t.Annotations)
	name := t.Name
	label := s.name + "." + name
	return tool.New(tool.Def[json.RawMessage]{
		Spec: tool.Spec{
			Name:                 name,
			Description:          toolDescription(s.name, t),
			JSONSchema:           schema,
			Namespace:            s.name,
			NamespaceDescription: nsDesc,
			DeferLoading:         s.cfg.deferred(name),
			ReadOnly:             readOnly,
			Destructive:          destructive,
			Timeout:              s.cfg.timeout(name),
		},
		Activity: func(json.RawMessage) string { return "Calling " + label },
		CompletedActivity: func(_ json.RawMessage, r tool.Result) string {
			return "Called " + label
		},
		Execute: func(ctx context.Context, args json.RawMessage) (tool.Result, error) {
			return s.call(ctx, name, args, readOnly, out)
		},
	})
}

// hints reads the annotations with the defaults of the MCP specification:
// a tool is read-only only when it says so, and a tool that is not
// read-only is destructive unless it says it is not.
func hints(a *sdk.ToolAnnotations) (readOnly, destructive bool) {
	if a == nil {
		return false, true
	}
	if a.ReadOnlyHint {
		return true, false
	}
	return false, a.DestructiveHint == nil || *a.DestructiveHint
}

// MaxToolDescription bounds a tool's description (longer ones are cut),
// MaxToolSchema its input schema as JSON (a tool with a larger one is left
// out): every catalog that enables the server carries them.
const (
	MaxToolDescription = 8 << 10
	MaxToolSchema      = 256 << 10
)

func toolDescription(server string, t *sdk.Tool) string {
	switch {
	case strings.TrimSpace(t.Description) != "":
		return cut(t.Description, MaxToolDescription)
	case t.Title != "":
		return t.Title
	case t.Annotations != nil && t.Annotations.Title != "":
		return t.Annotations.Title
	}
	return fmt.Sprintf("The tool %s of the MCP server %s.", t.Name, server)
}

// MaxInstructionsDescription bounds a namespace description taken from a
// server's instructions: it is in every catalog that enables the server,
// deferred or not, and instructions can run to pages. A configured
// description is used as written.
const MaxInstructionsDescription = 512

// namespaceDescription is the configured description, else the server's
// instructions (cut to MaxInstructionsDescription), else its name and
// version.
func namespaceDescription(name string, cfg ServerConfig, init *sdk.InitializeResult) string {
	if cfg.Description != "" {
		return cfg.Description
	}
	if init != nil && strings.TrimSpace(init.Instructions) != "" {
		return cut(strings.TrimSpace(init.Instructions), MaxInstructionsDescription)
	}
	if init != nil && init.ServerInfo != nil {
		info := init.ServerInfo
		title := info.Title
		if title == "" {
			title = info.Name
		}
		return strings.TrimSpace(fmt.Sprintf("Tools of the MCP server %s (%s %s).", name, title, info.Version))
	}
	return fmt.Sprintf("Tools of the MCP server %s.", name)
}

// call runs one tool call with the call's context: its deadline bounds
// the request, and its cancellation makes the SDK send
// notifications/cancelled to the server. A call that finds the connection
// gone is sent again on a new session when it cannot have reached the
// server, or when the tool is read-only; otherwise the model is told it
// may have taken effect.
func (s *server) call(ctx context.Context, name string, args json.RawMessage, readOnly bool, out *outputSchema) (tool.Result, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.connection(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return tool.Result{}, context.Cause(ctx)
			}
			if ae := authError(s.name, err); ae != nil { // auth*.go
				return tool.Result{}, ae
			}
			return tool.Result{}, tool.Errorf(tool.ToolError,
				"%v, so %s was not run. Try again later, or do without it.", noteError(s.name, err), name)
		}
		sctx, span := spans.MCP(ctx, s.name, "tools/call", name)
		params := &sdk.CallToolParams{Name: name, Arguments: args}
		if err := resumeParams(ctx, params); err != nil {
			spans.End(span, err)
			return tool.Result{}, tool.Errorf(tool.ToolError, "The answer to the MCP server %s's request for input could not be sent, so %s was not finished: %v", s.name, name, err)
		}
		unroute := s.requestProgress(ctx, params)
		unask := s.asking.add(turn.WithTool(ctx, s.name, name), args)
		res, err := c.cs.CallTool(sctx, params)
		unask()
		unroute()
		spans.End(span, err)
		if err == nil && res.NeedsInput() {
			return s.inputRequired(ctx, name, args, res)
		}
		if err == nil {
			return s.result(res, name, out)
		}
		if ctx.Err() != nil {
			// Timeout or abort: the dispatcher says which.
			return tool.Result{}, context.Cause(ctx)
		}
		if ae := authError(s.name, err); ae != nil { // auth*.go
			return tool.Result{}, ae
		}
		if unreadable(err) {
			// The server answered: its connection is sound, and dropping it
			// (or calling again) for one bad image would lose its state.
			return tool.Result{}, tool.Errorf(tool.ToolError,
				"The MCP server %s ran %s, but its result could not be read (%v), so its output is lost. Check its effect before calling it again.", s.name, name, err)
		}
		if !lost(c, err) {
			return tool.Result{}, tool.Errorf(tool.ToolError, "The MCP server %s refused the call: %v", s.name, err)
		}
		err = c.why(err)
		s.drop(c, err)
		notSent := errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, sdk.ErrSessionMissing)
		if attempt == 0 && (notSent || readOnly) {
			continue
		}
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"The connection to the MCP server %s was lost while %s ran (%v), so it may or may not have taken effect. The next call reconnects; check the effect before calling it again.",
			s.name, name, err)
	}
}

// cut shortens text to at most limit bytes, at the end of a sentence or
// line when one ends in the second half, else after a word, and marks the
// cut with "…".
func cut(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	head := text[:limit-len(" …")]
	for len(head) > 0 && !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	if i := max(strings.LastIndex(head, ". "), strings.LastIndex(head, "\n")); i > len(head)/2 {
		return strings.TrimSpace(head[:i+1]) + " …"
	}
	if i := strings.LastIndexByte(head, ' '); i > 0 {
		head = head[:i]
	}
	return strings.TrimSpace(head) + "…"
}

// unreadable reports whether err is a result that arrived but does not
// decode: data that is not base64 (an image's, a blob's), or JSON of the
// wrong shape.
func unreadable(err error) bool {
	var b64 base64.CorruptInputError
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	return errors.As(err, &b64) || errors.As(err, &syn) || errors.As(err, &typ)
}
