package turn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Env is what a category creator sees of the turn.
type Env struct {
	AgentID string
	TurnID  string
	Context protocol.Context
}

// Creator contributes one category's tools to a turn. It returns nothing
// when its category is not bound for the turn. Notes explain a source that
// could not contribute (a server that is down) without failing the turn.
type Creator func(ctx context.Context, env Env) (ts []*tool.Tool, notes []string, err error)

// Offer returns the creator of a category whose tools are fixed: ts, in
// that order, for the turns of kind (any kind when empty) whose context
// binds binding (every such turn when empty); nothing for the others.
func Offer(kind, binding string, ts ...*tool.Tool) Creator {
	return func(_ context.Context, env Env) ([]*tool.Tool, []string, error) {
		if kind != "" && env.Context.Kind != kind || binding != "" && !env.Context.Bound(binding) {
			return nil, nil, nil
		}
		return ts, nil, nil
	}
}

// Assembler builds a turn's tool set from an explicit, ordered list of
// creators: a tool is available when a creator returns it, and only then.
type Assembler struct {
	creators []Creator
}

// NewAssembler returns an assembler over creators, in catalog order.
func NewAssembler(creators ...Creator) *Assembler {
	return &Assembler{creators: creators}
}

// Assemble builds the set for one turn. Two tools with the same namespace
// and name are an error.
func (a *Assembler) Assemble(ctx context.Context, env Env) (*Set, error) {
	var all []*tool.Tool
	var notes []string
	for _, c := range a.creators {
		ts, n, err := c(ctx, env)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
		notes = append(notes, n...)
	}
	s, err := NewSet(all...)
	if err != nil {
		return nil, err
	}
	s.Notes = notes
	return s, nil
}

type key struct{ namespace, name string }

// Set is one turn's tools, in catalog order.
type Set struct {
	tools []*tool.Tool
	// names indexes the tools without a namespace, most of a set: a
	// string key takes the map's fast path, where a key struct is hashed
	// field by field.
	names map[string]*tool.Tool
	index map[key]*tool.Tool // the tools in a namespace
	// Notes are the creators' notes on sources that could not contribute.
	Notes []string

	once    sync.Once
	catalog json.RawMessage
	digest  string
}

// NewSet builds a set from tools in order; duplicate names are an error.
func NewSet(ts ...*tool.Tool) (*Set, error) {
	s := &Set{tools: ts, names: make(map[string]*tool.Tool, len(ts)), index: map[key]*tool.Tool{}}
	for _, t := range ts {
		sp := t.Spec()
		if s.Lookup(sp.Namespace, sp.Name) != nil {
			if sp.Namespace != "" {
				return nil, fmt.Errorf("duplicate tool %s.%s in one turn", sp.Namespace, sp.Name)
			}
			return nil, fmt.Errorf("duplicate tool %s in one turn", sp.Name)
		}
		if sp.Namespace == "" {
			s.names[sp.Name] = t
		} else {
			s.index[key{sp.Namespace, sp.Name}] = t
		}
	}
	return s, nil
}

// Lookup finds a tool by namespace ("" for none) and name.
func (s *Set) Lookup(namespace, name string) *tool.Tool {
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
