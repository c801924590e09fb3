package schema

import "strconv"

// decodeNested is the double_encoded rung inside the arguments: a string
// where the schema wants an object or an array ({"todos": "[{…}]"}, as
// some providers send nested values). Each string at a violated pointer
// whose content is exactly one JSON object or array (valid as it is, with
// no key twice) is replaced by that value, and only if the arguments then
// validate is the result kept: the string could not be the value, and the
// value it holds is its one reading. It reports the notes of the values it
// put in.
func (p *Params) decodeNested(v any, verr *ValidationError) (any, decodeNotes, bool) {
	at := make(map[string]bool, len(verr.Violations))
	for _, vi := range verr.Violations {
		at[vi.Pointer] = true
	}
	var notes decodeNotes
	found := false
	var walk func(v any, ptr string) any
	walk = func(v any, ptr string) any {
		switch x := v.(type) {
		case string:
			if !at[ptr] {
				return v
			}
			s := trimJSONSpace(x)
			if s == "" || (s[0] != '{' && s[0] != '[') {
				return v
			}
			inner, n, err := decodeAnyNotes(s)
			if err != nil || n.duplicateKey {
				return v
			}
			found = true
			notes.long = notes.long || n.long
			notes.fractionOrExponent = notes.fractionOrExponent || n.fractionOrExponent
			return inner
		case map[string]any:
			for k, e := range x {
				x[k] = walk(e, ptr+"/"+escape(k))
			}
		case []any:
			for i, e := range x {
				x[i] = walk(e, ptr+"/"+strconv.Itoa(i))
			}
		}
		return v
	}
	if len(at) == 0 {
		return v, notes, false
	}
	// The walk replaces in place: work on a copy, so that a refusal
	// reports the value as sent.
	nv := walk(deepCopy(v), "")
	if !found || depthOver(nv, MaxDepth) {
		// A value too deep once in place stays the string it was sent as,
		// and the violation stands.
		return v, notes, false
	}
	if p.nulls != nil {
		p.nulls.strip(nv)
	}
	if p.validate(nv, notes.long || notes.fractionOrExponent) != nil {
		return v, notes, false
	}
	return nv, notes, true
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = deepCopy(e)
		}
		return a
	}
	return v
}

// withRung adds name to rungs, keeping the ladder's order.
func withRung(names []string, name string) []string {
	rank := func(n string) int {
		for i, r := range rungs {
			if r.Name == n {
				return i
			}
		}
		return len(rungs)
	}
	out := make([]string, 0, len(names)+1)
	added := false
	for _, r := range names {
		if r == name {
			return names
		}
		if !added && rank(name) < rank(r) {
			out = append(out, name)
			added = true
		}
		out = append(out, r)
	}
	if !added {
		out = append(out, name)
	}
	return out
}
