package mcpdoor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the door's implementation version, told to clients.
const Version = "0.1.0"

// doorImpl is how the door names itself to clients.
func doorImpl() *mcp.Implementation {
	return &mcp.Implementation{Name: "toolruntime-mcp-door", Version: Version}
}

// catalogEntry is a principal's tool list turned into an SDK server,
// reused for CatalogTTL: a cache only, never needed for correctness.
type catalogEntry struct {
	server  *mcp.Server
	expires time.Time
	// tools are the server's tools by MCP name, for the fast path
	// (fastcall.go); nil when the catalog could not be read.
	tools map[string]catalogTool
}

// slot holds, per HTTP request (in its reqState), the server built for
// it: the SDK asks for it twice per request.
type slot struct {
	once   sync.Once
	server *mcp.Server
	entry  *catalogEntry
}

func (d *Door) withServerSlot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(withState(r.Context(), &reqState{})))
	})
}

// server is the SDK's getServer: the principal's server, built from its
// catalog.
func (d *Door) server(r *http.Request) *mcp.Server {
	if e := d.entry(r); e != nil {
		return e.server
	}
	return nil
}

// entry is the request's catalog entry, looked up (or built) once per
// request.
func (d *Door) entry(r *http.Request) *catalogEntry {
	st := stateOf(r.Context())
	if st == nil {
		return nil
	}
	s := &st.slot
	s.once.Do(func() {
		p := d.principalOf(r.Context())
		if p == nil {
			return
		}
		s.entry = d.serverFor(r.Context(), p)
		s.server = s.entry.server
	})
	return s.entry
}

func (d *Door) serverFor(ctx context.Context, p *Principal) *catalogEntry {
	now := time.Now()
	d.catMu.Lock()
	e := d.catalogs[p.Name]
	d.catMu.Unlock()
	if e != nil && now.Before(e.expires) {
		return e
	}
	tools, err := d.fetchTools(ctx, p)
	e = &catalogEntry{server: d.newServer(p, tools, err), expires: now.Add(d.cfg.CatalogTTL)}
	if err != nil {
		// Not cached: the next request asks the workers again.
		return e
	}
	e.tools = make(map[string]catalogTool, len(tools))
	for _, t := range tools {
		schema, err := json.Marshal(t.tool.InputSchema)
		t.headerParams = err != nil || bytes.Contains(schema, []byte("x-mcp-header"))
		e.tools[t.name] = t
	}
	d.catMu.Lock()
	d.catalogs[p.Name] = e
	d.catMu.Unlock()
	return e
}

// catalogTool is one tool of a principal's catalog, as MCP lists it.
type catalogTool struct {
	name      string // the MCP name: "ns.name", or "name"
	namespace string
	call      string // the tool's own name
	tool      *mcp.Tool
	// headerParams: the input schema names x-mcp-header parameters, whose
	// Mcp-Param-* headers the SDK checks; such calls are the SDK's.
	headerParams bool
}

// fetchTools asks the workers for the principal's catalog and reads it.
func (d *Door) fetchTools(ctx context.Context, p *Principal) ([]catalogTool, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tc := p.Context()
	rep, err := d.gw.Catalog(ctx, p.AgentID, catalogTurn, tc)
	if err != nil {
		d.log.Warn("mcp door: catalog request failed", "principal", p.Name, "err", err)
		return nil, err
	}
	tools, skipped, err := parseCatalog(rep.Tools, rep.Hints)
	if err != nil {
		d.log.Warn("mcp door: catalog unreadable", "principal", p.Name, "err", err)
		return nil, err
	}
	for _, s := range skipped {
		d.log.Info("mcp door: tool left out of the MCP list", "principal", p.Name, "tool", s)
	}
	return tools, nil
}

// catalogTurn is the turn id of the door's catalog requests: a catalog
// depends on the context, not on the turn.
const catalogTurn = "mcp-catalog"

var errNoCatalog = errors.New("the workers did not answer with a tool list; try again")

func (d *Door) newServer(p *Principal, tools []catalogTool, catErr error) *mcp.Server {
	ttl := int(d.cfg.CatalogTTL / time.Millisecond)
	opts := &mcp.ServerOptions{
		// Prompts, resources and completions are declared, and empty, so
		// that what discover and initialize say is what the door serves;
		// logging too, since the SDK answers logging/setLevel.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{},
			Prompts: &mcp.PromptCapabilities{}, Resources: &mcp.ResourceCapabilities{}, Completions: &mcp.CompletionCapabilities{}},
		CompletionHandler: func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
		},
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
			c.TTLMs = ttl
			c.CacheScope = "private"
		},
		Logger: sdkLogger(d.log),
	}
	opts.Capabilities.AddExtension(ExtTasks, map[string]any{})
	srv := mcp.NewServer(doorImpl(), opts)
	if catErr != nil {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/list" || method == "tools/call" {
					return nil, fmt.Errorf("%w (%v)", errNoCatalog, catErr)
				}
				return next(ctx, method, req)
			}
		})
		return srv
	}
	// A tools/call's handler waits for the fleet: the request's work
	// slot is given back when it starts (floodfair.go).
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				releaseWork(ctx)
			}
			return next(ctx, method, req)
		}
	})
	d.addTaskMethods(srv, p)
	for _, t := range tools {
		srv.AddTool(t.tool, d.callHandler(p, t))
	}
	return srv
}

// catalogEntryJSON is an entry of a Responses API tool list.
type catalogEntryJSON struct {
	Type         string            `json:"type"`
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	Parameters   json.RawMessage   `json:"parameters"`
	DeferLoading bool              `json:"defer_loading"`
	Tools        []json.RawMessage `json:"tools"`
}

// sdkLogger is the door's logger for the SDK, which logs every stateless
// request's connect and disconnect at Info: warnings and errors only.
func sdkLogger(l *slog.Logger) *slog.Logger {
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}
func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler { return minLevel{m.Handler.WithGroup(n), m.min} }
