package turn

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"unicode"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// search answers a client tool_search_call: it ranks the turn's deferred
// tools against the query with BM25 over their names, descriptions and
// namespace descriptions, and loads the best few. The output carries
// their full definitions, namespaced ones inside namespace entries.
func (d *Dispatcher) search(set *Set, c protocol.CallItem) *Outcome {
	var args struct {
		Query string `json:"query"`
	}
	if len(c.Search) > 0 {
		if err := json.Unmarshal(c.Search, &args); err != nil {
			return errorOutcome(c, tool.Errorf(tool.InvalidArguments, `tool_search takes {"query": "<what you need a tool for>"}: %v`, err))
		}
	}
	if strings.TrimSpace(args.Query) == "" {
		return errorOutcome(c, tool.Errorf(tool.InvalidArguments, `tool_search needs a non-empty "query" saying what you need a tool for.`))
	}
	limit := d.SearchLimit
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	found := Rank(set.Deferred(), args.Query, limit)
	o := &Outcome{CallID: c.CallID, Name: "tool_search", Namespace: c.Namespace}
	var entries []json.RawMessage
	namespaces := map[string]*namespaceEntry{}
	var order []string
	// The definitions go whole into the output item, which no clipping
	// can shorten: a tool whose definition would take the item past an
	// eighth of an event (an MCP tool with a huge schema) is left out,
	// and not loaded, rather than making the step's events too large.
	room, leftOut := d.MaxEventBytes/8, 0
	var loaded []string
	for _, t := range found {
		sp := t.Spec()
		def := t.Definition()
		size := len(def)
		if _, ok := namespaces[sp.Namespace]; !ok && sp.Namespace != "" {
			size += len(sp.Namespace) + len(sp.NamespaceDescription) + 64
		}
		if d.MaxEventBytes > 0 && size > room {
			leftOut++
			continue
		}
		room -= size
		loaded = append(loaded, ToolKey(sp.Namespace, sp.Name))
		if sp.Namespace == "" {
			entries = append(entries, def)
			continue
		}
		ns, ok := namespaces[sp.Namespace]
		if !ok {
			ns = &namespaceEntry{Type: "namespace", Name: sp.Namespace, Description: sp.NamespaceDescription}
			namespaces[sp.Namespace] = ns
			order = append(order, sp.Namespace)
		}
		ns.Tools = append(ns.Tools, def)
	}
	for _, name := range order {
		entries = append(entries, mustJSON(namespaces[name]))
	}
	if entries == nil {
		entries = []json.RawMessage{}
	}
	o.Item = mustJSON(protocol.ToolSearchOutput{Type: protocol.ItemToolSearchOutput, CallID: c.CallID, Execution: "client", Status: "completed", Tools: entries})
	o.Activity = "Searched tools for " + quoteLabel(args.Query)
	if loaded != nil {
		o.more().Loaded = loaded
	}
	o.Details = map[string]any{"query": args.Query, "loaded": loaded}
	if leftOut > 0 {
		o.Details.(map[string]any)["left_out_too_large"] = leftOut
	}
	return o
}

// Rank returns up to limit tools scored by BM25 (k1 1.2, b 0.75) against
// query, best first. Each tool is scored on two fields: its own text (the
// name, counted twice, and the description) and, at half weight, its
// namespace's (name and description). Scoring them apart keeps a long
// namespace description (an MCP server's instructions) from diluting the
// tool's own words. Tools that share no term with the query are left
// out, and so are those scoring under MinRelativeScore of the best: a
// search loads what was asked for, not every tool that shares a word
// with it. Ties keep the set's order, so the answer is deterministic.
func Rank(ts []*tool.Tool, query string, limit int) []*tool.Tool {
	q := terms(query)
	if len(q) == 0 || len(ts) == 0 {
		return nil
	}
	own := newField(1)
	ns := newField(namespaceWeight)
	for _, t := range ts {
		sp := t.Spec()
		own.add(terms(sp.Name + " " + sp.Name + " " + sp.Description))
		ns.add(terms(sp.Namespace + " " + sp.NamespaceDescription))
	}
	type scored struct {
		i     int
		score float64
	}
	var hits []scored
	for i := range ts {
		if s := own.score(i, q) + ns.score(i, q); s > 0 {
			hits = append(hits, scored{i, s})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	keep := 0
	for keep < len(hits) && keep < limit && hits[keep].score >= MinRelativeScore*hits[0].score {
		keep++
	}
	out := make([]*tool.Tool, keep)
	for i, h := range hits[:keep] {
		out[i] = ts[h.i]
	}
	return out
}

// MinRelativeScore is the share of the best score a tool needs to be
// loaded by a search.
const MinRelativeScore = 0.3

// namespaceWeight is the weight of the namespace field against the
// tool's own.
const namespaceWeight = 0.5

// field is one BM25 field over the tools being ranked.
type field struct {
	weight float64
	docs   []map[string]int // term frequencies per tool
	lens   []int
	df     map[string]int
	total  int
}

func newField(weight float64) *field {
	return &field{weight: weight, df: map[string]int{}}
}

func (f *field) add(doc []string) {
	tf := map[string]int{}
	for _, w := range doc {
		if tf[w] == 0 {
			f.df[w]++
		}
		tf[w]++
	}
	f.docs = append(f.docs, tf)
	f.lens = append(f.lens, len(doc))
	f.total += len(doc)
}

func (f *field) score(i int, q []string) float64 {
	const k1, b = 1.2, 0.75
	n := float64(len(f.docs))
	avg := math.Max(float64(f.total)/n, 1)
	s := 0.0
	for _, w := range q {
		c := float64(f.docs[i][w])
		if c == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(f.df[w])+0.5)/(float64(f.df[w])+0.5))
		s += idf * c * (k1 + 1) / (c + k1*(1-b+b*float64(f.lens[i])/avg))
	}
	return f.weight * s
}

// stopWords carry no meaning of their own in a query or a description.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an and any are as at be by can do does for from how i if in into is it its
		me my no not of on or so than that the then these this those to use used using via was what when where which
		who will with you your`) {
		m[w] = true
	}
	return m
}()

// terms lower-cases text and splits it into words, also splitting
// snake_case, kebab-case and camelCase names; it drops stop words and
// folds plurals ("issues", "matches", "directories").
func terms(text string) []string {
	var b strings.Builder
	var prev rune
	for _, r := range text {
		if unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
			b.WriteByte(' ') // camelCase: a new word starts
		}
		b.WriteRune(r)
		prev = r
	}
	f := strings.FieldsFunc(strings.ToLower(b.String()), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := f[:0]
	for _, w := range f {
		if !stopWords[w] {
			out = append(out, singular(w))
		}
	}
	return out
}

// singular folds the regular English plurals.
func singular(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && strings.HasSuffix(w, "es") && sibilant(w[:len(w)-2]):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

func sibilant(stem string) bool {
	for _, end := range []string{"ss", "sh", "ch", "x", "z", "o"} {
		if strings.HasSuffix(stem, end) {
			return true
		}
	}
	return false
}

func quoteLabel(s string) string {
	return "“" + textclip.Ellipsis(s, 60) + "”"
}
