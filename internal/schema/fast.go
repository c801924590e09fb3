package schema

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// fastNode validates the keyword subset that tool parameter schemas are
// made of (what Go types infer to, and what most raw schemas use) without
// the general validator's per-node closures and allocations. compileFast
// returns nil for a schema using anything else, and the general validator
// takes it; FuzzFastAgrees checks that the two agree on every value.
type fastNode struct {
	types    uint8 // bit set of the type* constants; 0 means any
	props    map[string]*fastNode
	required []string
	closed   bool      // additionalProperties: false
	extra    *fastNode // additionalProperties as a schema
	items    *fastNode
	enum     []any
	constVal any
	hasConst bool
	min, max *bound
	minLen   int
	maxLen   int
	pattern  *regexp.Regexp
	patternS string
	minItems int
	maxItems int
	format   func(any) bool
	formatS  string
	alwaysNo bool // the schema false
}

type bound struct {
	n         json.Number
	exclusive bool
}

const (
	typeNull uint8 = 1 << iota
	typeBool
	typeObject
	typeArray
	typeNumber
	typeInteger
	typeString
)

var typeBits = map[string]uint8{
	"null": typeNull, "boolean": typeBool, "object": typeObject, "array": typeArray,
	"number": typeNumber, "integer": typeInteger, "string": typeString,
}

// annotations carry no constraint.
var annotations = map[string]bool{
	"description": true, "title": true, "default": true, "examples": true,
	"$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// compileFast compiles a schema tree (from decodeOrdered) or returns nil.
func compileFast(v any) *fastNode {
	switch s := v.(type) {
	case bool:
		return &fastNode{alwaysNo: !s, minLen: -1, maxLen: -1, maxItems: -1}
	case *object:
		return compileFastObject(s)
	}
	return nil
}

func compileFastObject(o *object) *fastNode {
	n := &fastNode{minLen: -1, maxLen: -1, maxItems: -1}
	for _, k := range o.keys {
		v := o.vals[k]
		var ok bool
		switch {
		case annotations[k]:
			ok = true
		case k == "type":
			ok = n.setTypes(v)
		case k == "properties":
			ok = n.setProps(v)
		case k == "required":
			ok = n.setRequired(v)
		case k == "additionalProperties":
			switch a := v.(type) {
			case bool:
				n.closed, ok = !a, true
			default:
				n.extra = compileFast(a)
				ok = n.extra != nil
			}
		case k == "items":
			n.items = compileFast(v)
			ok = n.items != nil
		case k == "enum":
			n.enum, ok = v.([]any)
		case k == "const":
			n.constVal, n.hasConst, ok = v, true, true
		case k == "minimum", k == "maximum", k == "exclusiveMinimum", k == "exclusiveMaximum":
			ok = n.setBound(k, v)
		case k == "minLength", k == "maxLength", k == "minItems", k == "maxItems":
			ok = n.setCount(k, v)
		case k == "format":
			// Asserted, as the library asserts it; an unknown format is
			// an annotation there and here.
			name, isStr := v.(string)
			n.formatS, ok = name, isStr
			n.format = jsonschema.Formats[name]
		case k == "pattern":
			s, isStr := v.(string)
			if isStr {
				re, err := regexp.Compile(s)
				n.pattern, n.patternS, ok = re, s, err == nil
			}
		}
		if !ok {
			return nil
		}
	}
	return n
}

func (n *fastNode) setTypes(v any) bool {
	switch t := v.(type) {
	case string:
		n.types = typeBits[t]
		return n.types != 0
	case []any:
		for _, e := range t {
			s, _ := e.(string)
			b := typeBits[s]
			if b == 0 {
				return false
			}
			n.types |= b
		}
		return len(t) > 0
	}
	return false
}

func (n *fastNode) setProps(v any) bool {
	o, ok := v.(*object)
	if !ok {
		return false
	}
	n.props = make(map[string]*fastNode, len(o.keys))
	for _, k := range o.keys {
		c := compileFast(o.vals[k])
		if c == nil {
			return false
		}
		n.props[k] = c
	}
	return true
}

func (n *fastNode) setRequired(v any) bool {
	arr, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range arr {
		s, ok := e.(string)
		if !ok {
			return false
		}
		n.required = append(n.required, s)
	}
	return true
}

func (n *fastNode) setBound(k string, v any) bool {
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	b := &bound{n: num, exclusive: strings.HasPrefix(k, "exclusive")}
	if k == "minimum" || k == "exclusiveMinimum" {
		if n.min != nil {
			return false // both minimum and exclusiveMinimum: leave it to the library
		}
		n.min = b
	} else {
		if n.max != nil {
			return false
		}
		n.max = b
	}
	return true
}

func (n *fastNode) setCount(k string, v any) bool {
	num, ok := v.(json.Number)
	if !ok {
		return false
	}
	c, err := strconv.Atoi(num.String())
	if err != nil || c < 0 {
		return false
	}
	switch k {
	case "minLength":
		n.minLen = c
	case "maxLength":
		n.maxLen = c
	case "minItems":
		n.minItems = c
	case "maxItems":
		n.maxItems = c
	}
	return true
}

// path is where the walk stands, turned into a JSON pointer only when
// there is a violation to report: valid arguments cost no string building.
type path struct {
	tokens []pathToken
}

// paths recycles the walk's path stacks: validation runs for every call.
var paths = sync.Pool{New: func() any { return &path{tokens: make([]pathToken, 0, 8)} }}

type pathToken struct {
	key   string
	index int // for an array element, when elem
	elem  bool
}

func (p *path) String() string {
	if p == nil {
		return ""
	}
	var b strings.Builder
	for _, t := range p.tokens {
		b.WriteByte('/')
		if t.elem {
			b.WriteString(strconv.Itoa(t.index))
		} else {
			b.WriteString(escape(t.key))
		}
	}
	return b.String()
}

// validate appends the violations of v (a UseNumber-decoded value) at at.
func (n *fastNode) validate(v any, at *path, out []Violation) []Violation {
	if n.alwaysNo {
		return append(out, Violation{Pointer: at.String(), Message: "not allowed"})
	}
	if n.types != 0 && !n.typeOK(v) {
		return append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("expected %s, but got %s", n.typeNames(), jsonType(v))})
	}
	if n.hasConst && !jsonEqual(v, n.constVal) {
		out = append(out, Violation{Pointer: at.String(), Message: "value must be " + quoteJSON(n.constVal)})
	}
	if n.enum != nil {
		found := false
		for _, e := range n.enum {
			if jsonEqual(v, e) {
				found = true
				break
			}
		}
		if !found {
			vals := make([]string, len(n.enum))
			for i, e := range n.enum {
				vals[i] = quoteJSON(e)
			}
			out = append(out, Violation{Pointer: at.String(), Message: "value must be one of " + strings.Join(vals, ", ")})
		}
	}
	if n.format != nil && !n.format(v) {
		out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("%s is not valid %s", quoteJSON(v), quoteJSON(n.formatS))})
	}
	switch v := v.(type) {
	case map[string]any:
		out = n.validateObject(v, at, out)
	case []any:
		if len(v) < n.minItems {
			out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("minimum %d items required, but found %d items", n.minItems, len(v))})
		}
		if n.maxItems >= 0 && len(v) > n.maxItems {
			out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("maximum %d items required, but found %d items", n.maxItems, len(v))})
		}
		if n.items != nil {
			for i, e := range v {
				at.tokens = append(at.tokens, pathToken{index: i, elem: true})
				out = n.items.validate(e, at, out)
				at.tokens = at.tokens[:len(at.tokens)-1]
			}
		}
	case string:
		if n.minLen >= 0 || n.maxLen >= 0 {
			l := utf8.RuneCountInString(v)
			if l < n.minLen {
				out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("length must be >= %d, but got %d", n.minLen, l)})
			}
			if n.maxLen >= 0 && l > n.maxLen {
				out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("length must be <= %d, but got %d", n.maxLen, l)})
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(v) {
			out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("does not match pattern %s", quoteJSON(n.patternS))})
		}
	case json.Number:
		if n.min != nil {
			c := compareNumbers(v, n.min.n)
			if c < 0 || c == 0 && n.min.exclusive {
				op := ">="
				if n.min.exclusive {
					op = ">"
				}
				out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("must be %s %s but found %s", op, n.min.n, v)})
			}
		}
		if n.max != nil {
			c := compareNumbers(v, n.max.n)
			if c > 0 || c == 0 && n.max.exclusive {
				op := "<="
				if n.max.exclusive {
					op = "<"
				}
				out = append(out, Violation{Pointer: at.String(), Message: fmt.Sprintf("must be %s %s but found %s", op, n.max.n, v)})
			}
		}
	}
	return out
}

func (n *fastNode) validateObject(v map[string]any, at *path, out []Violation) []Violation {
	var missing []string
	for _, r := range n.required {
		if _, ok := v[r]; !ok {
			missing = append(missing, "'"+r+"'")
		}
	}
	if missing != nil {
		out = append(out, Violation{Pointer: at.String(), Message: "missing properties: " + strings.Join(missing, ", ")})
	}
	var extra []string
	for k, e := range v {
		if p, ok := n.props[k]; ok {
			at.tokens = append(at.tokens, pathToken{key: k})
			out = p.validate(e, at, out)
			at.tokens = at.tokens[:len(at.tokens)-1]
			continue
		}
		switch {
		case n.closed:
			extra = append(extra, "'"+k+"'")
		case n.extra != nil:
			at.tokens = append(at.tokens, pathToken{key: k})
			out = n.extra.validate(e, at, out)
			at.tokens = at.tokens[:len(at.tokens)-1]
		}
	}
	if extra != nil {
		sort.Strings(extra)
		out = append(out, Violation{Pointer: at.String(), Message: "additionalProperties " + strings.Join(extra, ", ") + " not allowed"})
	}
	return out
}

func (n *fastNode) typeOK(v any) bool {
	switch v := v.(type) {
	case nil:
		return n.types&typeNull != 0
	case bool:
		return n.types&typeBool != 0
	case map[string]any:
		return n.types&typeObject != 0
	case []any:
		return n.types&typeArray != 0
	case string:
		return n.types&typeString != 0
	case json.Number:
		return n.types&typeNumber != 0 || n.types&typeInteger != 0 && isIntegral(v)
	}
	return false
}

func (n *fastNode) typeNames() string {
	var names []string
	for _, name := range []string{"null", "boolean", "object", "array", "number", "integer", "string"} {
		if n.types&typeBits[name] != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, " or ")
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		if isIntegral(v) {
			return "integer"
		}
		return "number"
	}
	return "unknown"
}

// exactFloat reports whether a number literal converts to float64 without
// rounding (few enough digits), so float comparison is exact.
func exactFloat(n json.Number) (float64, bool) {
	s := n.String()
	digits := 0
	for i := 0; i < len(s) && s[i] != 'e' && s[i] != 'E'; i++ {
		if s[i] >= '0' && s[i] <= '9' {
			digits++
		}
	}
	if digits > 15 {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || f != 0 && math.Abs(f) < 1e-300 {
		return 0, false
	}
	return f, true
}

func bigRat(n json.Number) *big.Rat {
	r, ok := new(big.Rat).SetString(n.String())
	if !ok {
		return new(big.Rat)
	}
	return r
}

func compareNumbers(a, b json.Number) int {
	fa, oka := exactFloat(a)
	fb, okb := exactFloat(b)
	if oka && okb {
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	}
	return bigRat(a).Cmp(bigRat(b))
}

func isIntegral(n json.Number) bool {
	if f, ok := exactFloat(n); ok {
		return f == math.Trunc(f)
	}
	return bigRat(n).IsInt()
}

// jsonEqual is JSON equality: numbers by value, objects by members.
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		return ok && compareNumbers(a, b) == 0
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		switch b := b.(type) {
		case map[string]any:
			if len(a) != len(b) {
				return false
			}
			for k, av := range a {
				bv, ok := b[k]
				if !ok || !jsonEqual(av, bv) {
					return false
				}
			}
			return true
		case *object:
			if len(a) != len(b.keys) {
				return false
			}
			for k, av := range a {
				bv, ok := b.vals[k]
				if !ok || !jsonEqual(av, bv) {
					return false
				}
			}
			return true
		}
		return false
	case *object:
		m := make(map[string]any, len(a.keys))
		for _, k := range a.keys {
			m[k] = a.vals[k]
		}
		return jsonEqual(b, m)
	default:
		if _, ok := b.(*object); ok {
			return false
		}
		return a == b
	}
}

func quoteJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
