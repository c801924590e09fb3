package schema

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// flatParser is the direct parser of a flat struct: an object whose
// fields are all scalars (strings, booleans, numbers), the shape of most
// tools' parameters. It does what compileDirectStruct's parser does for
// such a struct, in one loop: no parser per field called through a func
// value, so that its scanner stays on the stack instead of coming from a
// pool, and no check of a string whose schema asks nothing of it but its
// type. Validating and decoding a call's arguments was the largest part
// of a no-op call's cost in the dispatcher. FuzzFlatAgrees holds it to
// the general path and to the per-field parser.
type flatParser struct {
	fields   []flatField
	required uint64
}

// flatField is one property of a flat struct, with the field it fills.
type flatField struct {
	name  string
	index int
	kind  reflect.Kind
	bits  int
	node  *fastNode
	// anyString: a string the schema checks for nothing but its type.
	anyString bool
	// absentIfNull: the null plan says a null here means absent.
	absentIfNull bool
}

// compileFlat returns the flat parser of t against n, or nil when t is
// not a flat struct the direct parser covers.
func compileFlat(n *fastNode, plan *nullPlan, t reflect.Type) *flatParser {
	if n.types != 0 && n.types&typeObject == 0 || n.extra != nil || n.enum != nil || n.hasConst || n.format != nil || n.alwaysNo {
		return nil
	}
	if !plainFields(t) {
		return nil
	}
	p := &flatParser{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		pn, ok := n.props[name]
		if !ok {
			continue // a key of that name is not in the schema: the general path
		}
		if len(p.fields) == 64 || pn == nil || pn.alwaysNo || binderFor(f.Type) == nil {
			return nil
		}
		ff := flatField{name: name, index: i, kind: f.Type.Kind(), node: pn}
		switch ff.kind {
		case reflect.String:
			ff.anyString = (pn.types == 0 || pn.types&typeString != 0) && pn.enum == nil && !pn.hasConst &&
				pn.format == nil && pn.minLen < 0 && pn.maxLen < 0 && pn.pattern == nil
		case reflect.Bool:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Float32, reflect.Float64:
			ff.bits = f.Type.Bits()
		default:
			return nil // pointers, slices, structs: the per-field parser
		}
		if plan != nil {
			if sub := plan.props[name]; sub != nil {
				ff.absentIfNull = sub.absentIfNull
			}
		}
		p.fields = append(p.fields, ff)
	}
	for _, r := range n.required {
		found := false
		for i, f := range p.fields {
			if f.name == r {
				p.required |= 1 << i
				found = true
			}
		}
		if !found {
			return nil // a required key no field fills
		}
	}
	return p
}

// parse parses args into dst (a flat struct, zero or as a released call
// left it: every field set is one args has). It reports false, leaving
// the rest to the general path, for anything but plain valid arguments.
func (p *flatParser) parse(args string, dst reflect.Value) bool {
	c := scanner{s: args}
	c.space()
	if c.peek() != '{' {
		return false
	}
	c.i++
	c.space()
	var got, present uint64 // keys seen; keys not standing for absent
	if c.peek() == '}' {
		c.i++
	} else {
		for more := true; more; {
			k, ok := c.str()
			if !ok {
				return false
			}
			var f *flatField
			var bit uint64
			for i := range p.fields {
				if p.fields[i].name == k {
					f, bit = &p.fields[i], 1<<i
					break
				}
			}
			if f == nil || got&bit != 0 {
				return false // an unknown key, or a key twice
			}
			got |= bit
			c.space()
			if c.peek() != ':' {
				return false
			}
			c.i++
			c.space()
			if strings.HasPrefix(c.s[c.i:], "null") {
				// A strict tool's null for an optional field it did not
				// send is its absence (nullPlan.strip); any other null
				// takes the general path.
				if !f.absentIfNull {
					return false
				}
				c.i += 4
			} else {
				if !c.flatValue(f, dst.Field(f.index)) {
					return false
				}
				present |= bit
			}
			if more, ok = c.next('}'); !ok {
				return false
			}
		}
	}
	c.space()
	return c.i == len(c.s) && present&p.required == p.required
}

// flatValue parses one scalar into dst, checked against f's schema as
// compileDirect's parser of its kind does.
func (c *scanner) flatValue(f *flatField, dst reflect.Value) bool {
	n := f.node
	switch f.kind {
	case reflect.String:
		s, ok := c.str()
		if !ok || !f.anyString && !n.directString(s) {
			return false
		}
		dst.SetString(s)
	case reflect.Bool:
		var b bool
		switch {
		case strings.HasPrefix(c.s[c.i:], "true"):
			b, c.i = true, c.i+4
		case strings.HasPrefix(c.s[c.i:], "false"):
			c.i += 5
		default:
			return false
		}
		if !n.directBool(b) {
			return false
		}
		dst.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lit, plain, ok := c.number()
		if !ok || !plain || !n.directNumber(json.Number(lit)) {
			return false // 2e2 and 1.0 take the general path
		}
		v, err := strconv.ParseInt(lit, 10, f.bits)
		if err != nil {
			return false
		}
		dst.SetInt(v)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		lit, plain, ok := c.number()
		if !ok || !plain || !n.directNumber(json.Number(lit)) {
			return false
		}
		v, err := strconv.ParseUint(lit, 10, f.bits)
		if err != nil {
			return false
		}
		dst.SetUint(v)
	case reflect.Float32, reflect.Float64:
		lit, _, ok := c.number()
		if !ok || !n.directNumber(json.Number(lit)) {
			return false
		}
		v, err := strconv.ParseFloat(lit, f.bits)
		if err != nil {
			return false
		}
		dst.SetFloat(v)
	default:
		return false
	}
	return true
}
