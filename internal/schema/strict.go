package schema

import (
	"fmt"
	"slices"
	"strings"
)

// keywords a provider's strict mode rejects. A schema using one cannot be
// sent strict without changing what it accepts, so it is refused instead.
var strictUnsupported = []string{
	"allOf", "oneOf", "not", "if", "then", "else", "patternProperties",
	"dependentRequired", "dependentSchemas", "unevaluatedProperties",
	"unevaluatedItems", "propertyNames", "prefixItems", "contains",
}

// makeStrict rewrites a schema tree in place into the strict subset:
// every object closes its properties (additionalProperties: false) and
// lists all of them in required; a property that was optional becomes
// nullable, and nulls records where a null now means "absent". Where no
// plan can follow ($defs, anyOf branches: nulls is nil), such a property's
// path is added to lost: the model must send null there, and the full
// schema, which validates the call, refuses it.
func makeStrict(node any, path string, nulls *nullPlan, lost *[]string) error {
	if b, ok := node.(bool); ok && b {
		return fmt.Errorf("%s accepts any value; strict mode needs every value to have a type", pathOrRoot(path))
	}
	o, ok := node.(*object)
	if !ok {
		return nil
	}
	for _, kw := range strictUnsupported {
		if _, has := o.get(kw); has {
			return fmt.Errorf("%s uses %q, which strict mode does not support", pathOrRoot(path), kw)
		}
	}
	// The provider refuses a strict tool with a value of no type (the
	// whole request fails, not only the call), so such a schema is
	// refused here, where its owner can read why.
	if !typed(o) {
		return fmt.Errorf("%s accepts any value (no type); strict mode needs every value to have a type", pathOrRoot(path))
	}
	for _, defs := range []string{"$defs", "definitions"} {
		if d, ok := o.get(defs); ok {
			if do, ok := d.(*object); ok {
				for _, k := range do.keys {
					// Definitions reached through $ref get no null plan:
					// a null inside one is validated as sent.
					if err := makeStrict(do.vals[k], path+"/"+defs+"/"+escape(k), nil, lost); err != nil {
						return err
					}
				}
			}
		}
	}
	if items, ok := o.get("items"); ok {
		var sub *nullPlan
		if nulls != nil {
			sub = &nullPlan{}
		}
		if err := makeStrict(items, path+"/items", sub, lost); err != nil {
			return err
		}
		if nulls != nil && !sub.empty() {
			nulls.items = sub
		}
	}
	if anyOf, ok := o.get("anyOf"); ok {
		if arr, ok := anyOf.([]any); ok {
			for i, s := range arr {
				if err := makeStrict(s, fmt.Sprintf("%s/anyOf/%d", path, i), nil, lost); err != nil {
					return err
				}
			}
		}
	}
	if !isObjectSchema(o) {
		return nil
	}
	props, _ := o.get("properties")
	po, _ := props.(*object)
	if ap, has := o.get("additionalProperties"); has && ap != false {
		return fmt.Errorf("%s allows additional properties; strict mode needs a closed object", pathOrRoot(path))
	}
	if po == nil {
		po = &object{vals: map[string]any{}}
		o.set("properties", po)
	}
	required := map[string]bool{}
	if r, ok := o.get("required"); ok {
		if arr, ok := r.([]any); ok {
			for _, v := range arr {
				if s, ok := v.(string); ok {
					required[s] = true
				}
			}
		}
	}
	all := make([]any, 0, len(po.keys))
	for _, k := range po.keys {
		all = append(all, k)
		var sub *nullPlan
		if nulls != nil {
			sub = &nullPlan{}
		}
		if err := makeStrict(po.vals[k], path+"/properties/"+escape(k), sub, lost); err != nil {
			return err
		}
		if !required[k] && !acceptsNull(po.vals[k]) {
			po.vals[k] = nullable(po.vals[k])
			if nulls != nil {
				sub.absentIfNull = true
			} else {
				*lost = append(*lost, "#"+path+"/properties/"+escape(k))
			}
		}
		if nulls != nil && !sub.empty() {
			if nulls.props == nil {
				nulls.props = map[string]*nullPlan{}
			}
			nulls.props[k] = sub
		}
	}
	o.set("additionalProperties", false)
	o.set("required", all)
	return nil
}

// typed reports whether a schema says what its values are: the strict
// subset refuses a schema with none of these (an "any" field).
func typed(o *object) bool {
	for _, kw := range []string{"type", "anyOf", "$ref", "enum", "const"} {
		if _, has := o.get(kw); has {
			return true
		}
	}
	return false
}

// openObjects lists, before makeStrict, the object schemas it would close
// that were open (no additionalProperties): for those the strict schema
// accepts less than the full one, so strict mode does not express the
// schema exactly. It walks where makeStrict does.
func openObjects(node any, path string, out []string) []string {
	o, ok := node.(*object)
	if !ok {
		return out
	}
	for _, defs := range []string{"$defs", "definitions"} {
		if d, ok := o.get(defs); ok {
			if do, ok := d.(*object); ok {
				for _, k := range do.keys {
					out = openObjects(do.vals[k], path+"/"+defs+"/"+escape(k), out)
				}
			}
		}
	}
	if items, ok := o.get("items"); ok {
		out = openObjects(items, path+"/items", out)
	}
	if anyOf, ok := o.get("anyOf"); ok {
		if arr, ok := anyOf.([]any); ok {
			for i, s := range arr {
				out = openObjects(s, fmt.Sprintf("%s/anyOf/%d", path, i), out)
			}
		}
	}
	if !isObjectSchema(o) {
		return out
	}
	if _, has := o.get("additionalProperties"); !has {
		out = append(out, pathOrRoot(path))
	}
	if props, ok := o.get("properties"); ok {
		if po, ok := props.(*object); ok {
			for _, k := range po.keys {
				out = openObjects(po.vals[k], path+"/properties/"+escape(k), out)
			}
		}
	}
	return out
}

func isObjectSchema(o *object) bool {
	t, _ := o.get("type")
	if t == "object" {
		return true
	}
	if arr, ok := t.([]any); ok && slices.Contains(arr, any("object")) {
		return true
	}
	_, hasProps := o.get("properties")
	return t == nil && hasProps
}

func acceptsNull(s any) bool {
	o, ok := s.(*object)
	if !ok {
		return s == true
	}
	switch t, _ := o.get("type"); t := t.(type) {
	case string:
		return t == "null"
	case []any:
		return slices.Contains(t, any("null"))
	}
	return false
}

// nullable returns s widened to accept null as well, keeping every other
// constraint of s.
func nullable(s any) any {
	o, ok := s.(*object)
	if !ok {
		return s
	}
	_, hasRef := o.get("$ref")
	_, hasConst := o.get("const") // a const cannot be widened to take null
	t, hasType := o.get("type")
	if hasRef || hasConst || !hasType {
		return &object{keys: []string{"anyOf"}, vals: map[string]any{
			"anyOf": []any{s, &object{keys: []string{"type"}, vals: map[string]any{"type": "null"}}},
		}}
	}
	switch t := t.(type) {
	case string:
		o.set("type", []any{t, "null"})
	case []any:
		o.set("type", append(t, "null"))
	}
	if e, ok := o.get("enum"); ok {
		if arr, ok := e.([]any); ok {
			o.set("enum", append(arr, nil))
		}
	}
	return o
}

// nullPlan marks, for a strict schema, the places where the model's null
// stands for an optional field it chose not to send.
type nullPlan struct {
	absentIfNull bool
	props        map[string]*nullPlan
	items        *nullPlan
}

func (p *nullPlan) empty() bool {
	return p == nil || (!p.absentIfNull && len(p.props) == 0 && p.items == nil)
}

// strip deletes, in place, every null that the plan says means "absent".
// It reports whether it deleted anything.
func (p *nullPlan) strip(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range p.props {
			val, ok := v[k]
			if !ok {
				continue
			}
			if val == nil && sub.absentIfNull {
				delete(v, k)
				changed = true
				continue
			}
			if sub.strip(val) {
				changed = true
			}
		}
	case []any:
		if p.items != nil {
			for _, e := range v {
				if p.items.strip(e) {
					changed = true
				}
			}
		}
	}
	return changed
}

// pointerEscaper escapes a key as a JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

func escape(k string) string {
	if !strings.ContainsAny(k, "~/") {
		return k
	}
	return pointerEscaper.Replace(k)
}

func pathOrRoot(p string) string {
	if p == "" {
		return "the root schema"
	}
	return "#" + p
}
