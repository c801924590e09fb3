package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Env is the turn whose tools are assembled.
type Env struct {
	AgentID string
	TurnID  string
	Context protocol.Context
}

// Assembler builds a turn's tool set from an explicit, ordered list of
// categories: a tool is available when a category returns it, and only
// then. Only main turns reach it; a task turn's catalog is fixed.
type Assembler struct {
	categories []tool.Category
}

// NewAssembler returns an assembler over categories, in catalog order.
func NewAssembler(categories ...tool.Category) *Assembler {
	return &Assembler{categories: categories}
}

// Assemble builds the set for one turn. A category's error or panic, a
// tool that is nil or was not made by tool.New, and two tools with the
// same namespace and name are errors. A turn that is not a main turn (a
// workflow task turn, whose catalog is fixed) gets no tools: no category
// is asked.
func (a *Assembler) Assemble(ctx context.Context, env Env) (*Set, error) {
	if env.Context.Kind != protocol.KindText {
		return NewSet()
	}
	as := &assembly{context: env.Context}
	ctx = context.WithValue(ctx, assemblyKey{}, as)
	// A copy of the bindings, made again only after a category changed
	// it: what one category does to it no other sees, and a step does
	// not pay a copy per category.
	bindings := cloneBindings(env.Context.Bindings)
	var all []*tool.Tool
	for _, c := range a.categories {
		ts, err := Offered(ctx, c, tool.Turn{AgentID: env.AgentID, TurnID: env.TurnID, Kind: env.Context.Kind, Bindings: bindings})
		if err != nil {
			return nil, err
		}
		if !maps.Equal(bindings, env.Context.Bindings) {
			bindings = cloneBindings(env.Context.Bindings)
		}
		all = append(all, ts...)
	}
	s, err := NewSet(all...)
	if err != nil {
		return nil, err
	}
	s.Notes, s.unlisted = as.notes, as.unlisted
	return s, nil
}

func cloneBindings(b map[string]bool) map[string]bool {
	if b == nil {
		return map[string]bool{}
	}
	return maps.Clone(b)
}

// Offered returns the tools c offers the turn t. A panic in c.Tools, or
// a tool among those it returns that is nil or was not made by tool.New,
// is an error like the one it returns: the request fails, the worker
// goes on.
func Offered(ctx context.Context, c tool.Category, t tool.Turn) (ts []*tool.Tool, err error) {
	defer func() {
		if r := recover(); r != nil {
			ts, err = nil, fmt.Errorf("category %s panicked: %v", c.Name, r)
		}
	}()
	ts, err = c.Tools(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("category %s: %w", c.Name, err)
	}
	// The set reads every tool's Spec, outside this recover: a nil one
	// would crash the worker, not the request.
	for i, x := range ts {
		if x == nil || x.Definition() == nil {
			return nil, fmt.Errorf("category %s: tool %d of %d is nil or was not made by tool.New", c.Name, i, len(ts))
		}
	}
	return ts, nil
}

// assembly is what Assemble gives the built-in categories beyond
// tool.Turn, through the context of their Tools call.
type assembly struct {
	context  protocol.Context
	notes    []string
	unlisted []Unlisted // unlisted.go
}

type assemblyKey struct{}

// TurnContext is, in a category's Tools function called by Assemble,
// the turn's whole context as the gateway sent it (the skills and MCP
// servers it names); the zero Context elsewhere.
func TurnContext(ctx context.Context) protocol.Context {
	if as, ok := ctx.Value(assemblyKey{}).(*assembly); ok {
		return as.context
	}
	return protocol.Context{}
}

// Note adds notes to the catalog of the turn that Assemble is building,
// from a category's Tools function: they explain a source that could not
// contribute (a server that is down) without failing the turn. Elsewhere
// it does nothing.
func Note(ctx context.Context, notes ...string) {
	if as, ok := ctx.Value(assemblyKey{}).(*assembly); ok {
		as.notes = append(as.notes, notes...)
	}
}

type key struct{ namespace, name string }

// Set is one turn's tools, in catalog order.
type Set struct {
	tools []*tool.Tool
	// names indexes the tools without a namespace, most of a set: a
	// string key takes the map's fast path, where a key struct is hashed
	// field by field. A set of at most scanTools tools has neither map and
	// is searched in order: a set is made per step, and its two maps
	// were a tenth of what a step in flight keeps.
	names map[string]*tool.Tool
	index map[key]*tool.Tool // the tools in a namespace
	// Notes are the categories' notes on sources that could not contribute.
	Notes []string
	// unlisted answer calls of names the set does not hold (unlisted.go).
	unlisted []Unlisted
	// spaced is set when a tool of a set searched in order has a
	// namespace: without one, a lookup compares names alone (a tool's
	// namespace is in its Spec, which a lookup would copy whole).
	spaced bool

	once    sync.Once
	catalog json.RawMessage
	digest  string
}

// NewSet builds a set from tools in order; duplicate names are an error.
func NewSet(ts ...*tool.Tool) (*Set, error) {
	s := &Set{tools: ts}
	if len(ts) <= scanTools {
		for i, t := range ts {
			sp := t.Spec()
			if scan(ts[:i], true, sp.Namespace, sp.Name) != nil {
				return nil, duplicate(sp)
			}
			s.spaced = s.spaced || sp.Namespace != ""
		}
		return s, nil
	}
	s.names, s.index = make(map[string]*tool.Tool, len(ts)), map[key]*tool.Tool{}
	for _, t := range ts {
		sp := t.Spec()
		if s.Lookup(sp.Namespace, sp.Name) != nil {
			return nil, duplicate(sp)
		}
		if sp.Namespace == "" {
			s.names[sp.Name] = t
		} else {
			s.index[key{sp.Namespace, sp.Name}] = t
		}
	}
	return s, nil
}

// scanTools is the most tools a set searches in order instead of by
// map: a lookup compares names until one matches, which for a few tools
// costs less than hashing the name.
const scanTools = 16

// scan finds a tool of ts by namespace and name, in order; spaced false
// says that no tool of ts has a namespace.
func scan(ts []*tool.Tool, spaced bool, namespace, name string) *tool.Tool {
	if !spaced {
		if namespace != "" {
			return nil
		}
		for _, t := range ts {
			if t.Name() == name {
				return t
			}
		}
		return nil
	}
	for _, t := range ts {
		if t.Name() == name && t.Spec().Namespace == namespace {
			return t
		}
	}
	return nil
}

func duplicate(sp tool.Spec) error {
	if sp.Namespace != "" {
		return fmt.Errorf("duplicate tool %s.%s in one turn", sp.Namespace, sp.Name)
	}
	return fmt.Errorf("duplicate tool %s in one turn", sp.Name)
}

// Lookup finds a tool by namespace ("" for none) and name.
func (s *Set) Lookup(namespace, name string) *tool.Tool {
	if s.names == nil {
		return scan(s.tools, s.spaced, namespace, name)
	}
	if namespace == "" {
		return s.names[name]
	}
	return s.index[key{namespace, name}]
}

// Tools returns the set's tools in order.
func (s *Set) Tools() []*tool.Tool { return s.tools }

// Deferred returns the deferred tools of the set, in order.
func (s *Set) Deferred() []*tool.Tool {
	var out []*tool.Tool
	for _, t := range s.tools {
		if t.Spec().DeferLoading {
			out = append(out, t)
		}
	}
	return out
}

// Catalog returns the Responses API tool list and its digest (sha256 hex
// of the list's bytes). Both are byte-identical for the same tools in the
// same order.
func (s *Set) Catalog() (json.RawMessage, string) {
	s.once.Do(func() {
		s.catalog = buildCatalog(s.tools)
		sum := sha256.Sum256(s.catalog)
		s.digest = hex.EncodeToString(sum[:])
	})
	return s.catalog, s.digest
}

type namespaceEntry struct {
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Tools       []json.RawMessage `json:"tools"`
}

type deferredDef struct {
	Type         string `json:"type"`
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	DeferLoading bool   `json:"defer_loading"`
}

// ToolSearchEntry is the client-executed tool search tool that ends a
// catalog holding deferred tools.
var ToolSearchEntry = json.RawMessage(`{"type":"tool_search","execution":"client","description":"Search the deferred tools of this turn by what you need to do; the best matches are loaded with their full definitions.","parameters":{"type":"object","properties":{"query":{"type":"string","description":"What you need a tool for."}},"required":["query"],"additionalProperties":false}}`)

// buildCatalog lays the tools out in order; a namespace's tools are
// grouped in one entry standing where its first tool stood. A deferred
// tool is listed without its parameters, which arrive with the
// tool_search_output that loads it; inside a namespace it is listed by
// name alone, because the provider shows a deferred namespace by its own
// name and description until tool search loads its functions, so their
// descriptions would be bytes no model reads.
func buildCatalog(ts []*tool.Tool) json.RawMessage {
	var entries []any
	namespaces := map[string]*namespaceEntry{}
	deferred := false
	for _, t := range ts {
		sp := t.Spec()
		def := t.Definition()
		if sp.DeferLoading {
			deferred = true
			short := deferredDef{Type: "function", Name: sp.Name, DeferLoading: true}
			if sp.Namespace == "" {
				short.Description = sp.Description
			}
			def = mustJSON(short)
		}
		if sp.Namespace == "" {
			entries = append(entries, def)
			continue
		}
		ns, ok := namespaces[sp.Namespace]
		if !ok {
			ns = &namespaceEntry{Type: "namespace", Name: sp.Namespace}
			namespaces[sp.Namespace] = ns
			entries = append(entries, ns)
		}
		if ns.Description == "" {
			ns.Description = sp.NamespaceDescription
		}
		ns.Tools = append(ns.Tools, def)
	}
	if deferred {
		entries = append(entries, ToolSearchEntry)
	}
	if entries == nil {
		entries = []any{}
	}
	return mustJSON(entries)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // definitions are valid JSON by construction
	}
	return b
}
