package turn

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/tools"
)

// search answers a client tool_search_call: it ranks the turn's deferred
// tools against the query with BM25 over their names, descriptions and
// namespace descriptions, and loads the best few. The output carries
// their full definitions, namespaced ones inside namespace entries.
func (d *Dispatcher) search(set *Set, c protocol.Call) *Outcome {
	var args struct {
		Query string `json:"query"`
	}
	if len(c.Search) > 0 {
		if err := json.Unmarshal(c.Search, &args); err != nil {
			return errorOutcome(c, tools.Errorf(tools.InvalidArguments, `tool_search takes {"query": "<what you need a tool for>"}: %v`, err))
		}
	}
	if strings.TrimSpace(args.Query) == "" {
		return errorOutcome(c, tools.Errorf(tools.InvalidArguments, `tool_search needs a non-empty "query" saying what you need a tool for.`))
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
	for _, t := range found {
		sp := t.Spec()
		o.Loaded = append(o.Loaded, ToolKey(sp.Namespace, sp.Name))
		if sp.Namespace == "" {
			entries = append(entries, t.Definition())
			continue
		}
		ns, ok := namespaces[sp.Namespace]
		if !ok {
			ns = &namespaceEntry{Type: "namespace", Name: sp.Namespace, Description: sp.NamespaceDescription}
			namespaces[sp.Namespace] = ns
			order = append(order, sp.Namespace)
		}
		ns.Tools = append(ns.Tools, t.Definition())
	}
	for _, name := range order {
		entries = append(entries, mustJSON(namespaces[name]))
	}
	if entries == nil {
		entries = []json.RawMessage{}
	}
	o.Item = mustJSON(protocol.ToolSearchOutput{Type: protocol.ItemToolSearchOutput, CallID: c.CallID, Execution: "client", Status: "completed", Tools: entries})
	o.Activity = "Searched tools for " + quoteLabel(args.Query)
	o.Details = map[string]any{"query": args.Query, "loaded": o.Loaded}
	return o
}

// Rank returns up to limit tools scored by BM25 (k1 1.2, b 0.75) against
// query, best first; tools that share no term with it are left out. Ties
// keep the set's order, so the answer is deterministic.
func Rank(ts []*tools.Tool, query string, limit int) []*tools.Tool {
	q := terms(query)
	if len(q) == 0 || len(ts) == 0 {
		return nil
	}
	docs := make([][]string, len(ts))
	df := map[string]int{}
	total := 0
	for i, t := range ts {
		sp := t.Spec()
		// The name counts twice: it is the densest description of a tool.
		text := sp.Name + " " + sp.Name + " " + sp.Namespace + " " + sp.Description + " " + sp.NamespaceDescription
		docs[i] = terms(text)
		total += len(docs[i])
		seen := map[string]bool{}
		for _, w := range docs[i] {
			if !seen[w] {
				seen[w] = true
				df[w]++
			}
		}
	}
	avg := float64(total) / float64(len(ts))
	const k1, b = 1.2, 0.75
	type scored struct {
		i     int
		score float64
	}
	var hits []scored
	n := float64(len(ts))
	for i, doc := range docs {
		tf := map[string]int{}
		for _, w := range doc {
			tf[w]++
		}
		s := 0.0
		for _, w := range q {
			f := float64(tf[w])
			if f == 0 {
				continue
			}
			idf := math.Log(1 + (n-float64(df[w])+0.5)/(float64(df[w])+0.5))
			s += idf * f * (k1 + 1) / (f + k1*(1-b+b*float64(len(doc))/avg))
		}
		if s > 0 {
			hits = append(hits, scored{i, s})
		}
	}
	sort.SliceStable(hits, func(a, b int) bool { return hits[a].score > hits[b].score })
	if len(hits) > limit {
		hits = hits[:limit]
	}
	out := make([]*tools.Tool, len(hits))
	for i, h := range hits {
		out[i] = ts[h.i]
	}
	return out
}

// terms lower-cases text and splits it into words, also splitting
// snake_case and kebab-case names, and drops a plural "s".
func terms(text string) []string {
	f := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	out := f[:0]
	for _, w := range f {
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
	}
	return out
}

func quoteLabel(s string) string {
	if len(s) > 60 {
		n := 60
		for n > 0 && !utf8.RuneStart(s[n]) {
			n-- // never cut a character in half
		}
		s = s[:n] + "…"
	}
	return "“" + s + "”"
}
