package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// A binder stores a validated value (the shapes decodeAny produces) into a
// Go value the way json.Unmarshal would, without parsing the text a second
// time. Binders are compiled once per type, by reflection, at tool
// definition; types they do not cover (custom unmarshalers, interfaces,
// embedded structs, byte slices, ",string" fields) get none and keep
// json.Unmarshal. FuzzBindAgrees holds binders to json.Unmarshal's results.
type binder func(v any, dst reflect.Value) error

var binders sync.Map // reflect.Type → binder (nil when not covered)

// Bind stores v, a value returned by ParseValue, into *dst. It reports
// false when T is not covered, and the caller unmarshals JSON instead.
func Bind[T any](v any, dst *T) (bool, error) {
	b := binderFor(reflect.TypeFor[T]())
	if b == nil {
		return false, nil
	}
	return true, b(v, reflect.ValueOf(dst).Elem())
}

// BinderFor is Bind for one T, with the lookup of T's binder done once:
// nil when T is not covered. A tool binds every call of its type, and the
// lookup was a visible part of a call's cost.
func BinderFor[T any]() func(v any, dst *T) error {
	b := binderFor(reflect.TypeFor[T]())
	if b == nil {
		return nil
	}
	return func(v any, dst *T) error { return b(v, reflect.ValueOf(dst).Elem()) }
}

func binderFor(t reflect.Type) binder {
	if b, ok := binders.Load(t); ok {
		return b.(binder)
	}
	b := compileBinder(t, map[reflect.Type]bool{})
	binders.Store(t, b)
	return b
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func compileBinder(t reflect.Type, seen map[reflect.Type]bool) binder {
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) ||
		t.Implements(jsonUnmarshaler) || t.Implements(textUnmarshaler) {
		return nil
	}
	if seen[t] {
		return nil // recursive types keep json.Unmarshal
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.String:
		return scalar(t, func(v string, dst reflect.Value) bool { dst.SetString(v); return true })
	case reflect.Bool:
		return scalar(t, func(v bool, dst reflect.Value) bool { dst.SetBool(v); return true })
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar(t, func(v json.Number, dst reflect.Value) bool {
			n, err := strconv.ParseInt(string(integral(v)), 10, t.Bits())
			if err != nil {
				return false
			}
			dst.SetInt(n)
			return true
		})
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar(t, func(v json.Number, dst reflect.Value) bool {
			n, err := strconv.ParseUint(string(integral(v)), 10, t.Bits())
			if err != nil {
				return false
			}
			dst.SetUint(n)
			return true
		})
	case reflect.Float32, reflect.Float64:
		return scalar(t, func(v json.Number, dst reflect.Value) bool {
			f, err := strconv.ParseFloat(string(v), t.Bits())
			if err != nil {
				return false
			}
			dst.SetFloat(f)
			return true
		})
	case reflect.Pointer:
		elem := compileBinder(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v any, dst reflect.Value) error {
			if v == nil {
				dst.SetZero()
				return nil
			}
			if dst.IsNil() {
				dst.Set(reflect.New(t.Elem()))
			}
			return elem(v, dst.Elem())
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // base64 text in JSON
		}
		elem := compileBinder(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v any, dst reflect.Value) error {
			switch v := v.(type) {
			case nil:
				dst.SetZero()
				return nil
			case []any:
				s := reflect.MakeSlice(t, len(v), len(v))
				for i, e := range v {
					if err := elem(e, s.Index(i)); err != nil {
						return err
					}
				}
				dst.Set(s)
				return nil
			}
			return typeError(v, t)
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key() != reflect.TypeFor[string]() {
			return nil
		}
		elem := compileBinder(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v any, dst reflect.Value) error {
			switch v := v.(type) {
			case nil:
				dst.SetZero()
				return nil
			case map[string]any:
				if dst.IsNil() {
					dst.Set(reflect.MakeMapWithSize(t, len(v)))
				}
				for k, e := range v {
					ev := reflect.New(t.Elem()).Elem()
					if err := elem(e, ev); err != nil {
						return err
					}
					dst.SetMapIndex(reflect.ValueOf(k), ev)
				}
				return nil
			}
			return typeError(v, t)
		}
	case reflect.Struct:
		return compileStruct(t, seen)
	}
	return nil
}

// integral is n in integer form when it is an integral number written
// with a fraction or an exponent (2e2, 1.0): the value validated as an
// integer is stored in a Go integer with that exact value.
func integral(n json.Number) json.Number {
	i, _ := integerForm(n)
	return i
}

// scalar binds a JSON value of type V with set, which reports false for a
// value the Go type cannot hold; null leaves the destination as it is, as
// json.Unmarshal does.
func scalar[V any](t reflect.Type, set func(V, reflect.Value) bool) binder {
	return func(v any, dst reflect.Value) error {
		if v == nil {
			return nil
		}
		if x, ok := v.(V); ok && set(x, dst) {
			return nil
		}
		return typeError(v, t)
	}
}

type fieldBinder struct {
	name  string
	index int
	bind  binder
}

func compileStruct(t reflect.Type, seen map[reflect.Type]bool) binder {
	var fields []fieldBinder
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			return nil // embedded fields follow json's promotion rules
		}
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			return nil
		}
		if name == "" {
			name = f.Name
		}
		b := compileBinder(f.Type, seen)
		if b == nil {
			return nil
		}
		fields = append(fields, fieldBinder{name: name, index: i, bind: b})
	}
	byName := make(map[string]*fieldBinder, len(fields))
	for i := range fields {
		byName[fields[i].name] = &fields[i]
	}
	return func(v any, dst reflect.Value) error {
		switch v := v.(type) {
		case nil:
			return nil
		case map[string]any:
			for k, e := range v {
				f := byName[k]
				if f == nil {
					// json matches names case-insensitively when no
					// field has the exact name.
					for i := range fields {
						if strings.EqualFold(fields[i].name, k) {
							f = &fields[i]
							break
						}
					}
					if f == nil {
						continue
					}
				}
				if err := f.bind(e, dst.Field(f.index)); err != nil {
					return err
				}
			}
			return nil
		}
		return typeError(v, t)
	}
}

func typeError(v any, t reflect.Type) error {
	return fmt.Errorf("cannot store %s %s in a Go value of type %s", jsonType(v), quoteJSON(v), t)
}

// A direct parser decodes a call's argument text straight into T and
// validates it on the way, for the common case: text that is plain JSON
// (no escapes in its strings, no nulls, no repair to make), of the shapes
// tool parameters are made of (objects of scalars, nested objects, arrays),
// against a schema the fast validator covers. It allocates nothing of its
// own: no map, no boxed value, no path. It reports false whenever it is
// not certain that the general path (ParseValue, then the binder) would
// accept the text and store the same T; the caller then takes that path,
// which words the errors. FuzzDirectAgrees holds it to the general path.
type direct func(c *scanner, dst reflect.Value, depth int) bool

// DirectFor returns p's direct parser into T, or nil when p or T is not
// covered (a schema the fast validator does not take, a T without a
// binder, a root that is not a struct).
func DirectFor[T any](p *Params) func(args string, dst *T) bool {
	parse := DirectValueFor[T](p)
	if parse == nil {
		return nil
	}
	return func(args string, dst *T) bool { return parse(args, reflect.ValueOf(dst).Elem()) }
}

// DirectValueFor is DirectFor for a caller that keeps the reflect.Value
// of the T it parses into (settable, of type T): a tool's decoded
// parameters, reused call after call, make it once.
func DirectValueFor[T any](p *Params) func(args string, dst reflect.Value) bool {
	t := reflect.TypeFor[T]()
	if p == nil || p.fast == nil || t.Kind() != reflect.Struct || binderFor(t) == nil {
		return nil
	}
	if fp := compileFlat(p.fast, p.nulls, t); fp != nil {
		return fp.parse
	}
	fn := compileDirect(p.fast, p.nulls, t, map[reflect.Type]bool{})
	if fn == nil {
		return nil
	}
	return func(args string, dst reflect.Value) bool {
		// Pooled: handed to the parsers through a func value, a scanner
		// on the stack would escape, one allocation per call.
		c := scanners.Get().(*scanner)
		c.s, c.i = args, 0
		c.space()
		ok := fn(c, dst, 0)
		c.space()
		ok = ok && c.i == len(c.s)
		c.s = ""
		scanners.Put(c)
		return ok
	}
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// scanner reads JSON text for a direct parser.
type scanner struct {
	s string
	i int
}

func (c *scanner) space() {
	for c.i < len(c.s) {
		// Most bytes looked at here are no space: one comparison says so.
		if b := c.s[c.i]; b > ' ' || !isSpace(b) {
			return
		}
		c.i++
	}
}

func (c *scanner) peek() byte {
	if c.i < len(c.s) {
		return c.s[c.i]
	}
	return 0
}

// str reads a string as the general path's decoder does (escapes
// decoded; invalid UTF-8 and lone surrogates refused).
func (c *scanner) str() (string, bool) {
	if c.peek() != '"' {
		return "", false
	}
	// The common string, plain ASCII without escapes, is read here: the
	// decoder's fast path is the same test, one call further.
	for j := c.i + 1; j < len(c.s); j++ {
		b := c.s[j]
		if b == '"' {
			s := c.s[c.i+1 : j]
			c.i = j + 1
			return s, true
		}
		if b == '\\' || b < 0x20 || b >= utf8.RuneSelf {
			break
		}
	}
	d := decoder{s: c.s, i: c.i}
	s, err := d.str()
	if err != nil {
		return "", false
	}
	c.i = d.i
	return s, true
}

// number reads a number literal by the JSON grammar; plain reports a
// short integer without fraction or exponent, always in range.
func (c *scanner) number() (lit string, plain, ok bool) {
	d := decoder{s: c.s, i: c.i}
	if c.peek() != '-' && (c.peek() < '0' || c.peek() > '9') {
		return "", false, false
	}
	if _, err := d.number(); err != nil {
		return "", false, false
	}
	lit = c.s[c.i:d.i]
	c.i = d.i
	plain = !d.notes.fractionOrExponent && len(lit) <= 18
	if !plain && !usableNumber(lit) {
		return "", false, false
	}
	return lit, plain, true
}

// skip moves past the ',' or the closing byte after a member or an
// element: it reports whether one more follows, and ok false on bad text.
func (c *scanner) next(closing byte) (more, ok bool) {
	c.space()
	switch c.peek() {
	case ',':
		c.i++
		c.space()
		return true, true
	case closing:
		c.i++
		return false, true
	}
	return false, false
}

// compileDirect compiles the direct parser of values of type t against
// n, or returns nil when the pair is not covered.
func compileDirect(n *fastNode, plan *nullPlan, t reflect.Type, seen map[reflect.Type]bool) direct {
	if n == nil || n.alwaysNo || binderFor(t) == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		return func(c *scanner, dst reflect.Value, _ int) bool {
			s, ok := c.str()
			if !ok || !n.directString(s) {
				return false
			}
			dst.SetString(s)
			return true
		}
	case reflect.Bool:
		return func(c *scanner, dst reflect.Value, _ int) bool {
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
			return true
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return func(c *scanner, dst reflect.Value, _ int) bool {
			lit, plain, ok := c.number()
			if !ok || !plain || !n.directNumber(json.Number(lit)) {
				return false // 2e2 and 1.0 take the general path
			}
			v, err := strconv.ParseInt(lit, 10, bits)
			if err != nil {
				return false
			}
			dst.SetInt(v)
			return true
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := t.Bits()
		return func(c *scanner, dst reflect.Value, _ int) bool {
			lit, plain, ok := c.number()
			if !ok || !plain || !n.directNumber(json.Number(lit)) {
				return false
			}
			v, err := strconv.ParseUint(lit, 10, bits)
			if err != nil {
				return false
			}
			dst.SetUint(v)
			return true
		}
	case reflect.Float32, reflect.Float64:
		bits := t.Bits()
		return func(c *scanner, dst reflect.Value, _ int) bool {
			lit, _, ok := c.number()
			if !ok || !n.directNumber(json.Number(lit)) {
				return false
			}
			f, err := strconv.ParseFloat(lit, bits)
			if err != nil {
				return false
			}
			dst.SetFloat(f)
			return true
		}
	case reflect.Pointer:
		elem := compileDirect(n, plan, t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(c *scanner, dst reflect.Value, depth int) bool {
			// A null takes the general path; a pointer is set only once
			// its value is known good (a failed parse leaves dst to the
			// general path, which starts from a zero T again).
			if dst.IsNil() {
				dst.Set(reflect.New(t.Elem()))
			}
			return elem(c, dst.Elem(), depth)
		}
	case reflect.Slice:
		return compileDirectSlice(n, plan, t, seen)
	case reflect.Struct:
		return compileDirectStruct(n, plan, t, seen)
	}
	return nil
}

// directField is one property of an object with the field it fills.
type directField struct {
	name  string
	index int
	bit   uint64
	parse direct
	// absentIfNull: the null plan says a null here means absent.
	absentIfNull bool
}

func compileDirectStruct(n *fastNode, plan *nullPlan, t reflect.Type, seen map[reflect.Type]bool) direct {
	if seen[t] || n.types != 0 && n.types&typeObject == 0 || n.extra != nil || n.enum != nil || n.hasConst || n.format != nil {
		return nil
	}
	if !plainFields(t) {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	var fields []directField
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
		if len(fields) == 64 {
			return nil
		}
		// A field that cannot be parsed directly makes its key take the
		// general path, when it appears.
		var sub *nullPlan
		if plan != nil {
			sub = plan.props[name]
		}
		parse := compileDirect(pn, sub, f.Type, seen)
		if parse == nil {
			parse = func(*scanner, reflect.Value, int) bool { return false }
		}
		fields = append(fields, directField{name: name, index: i, bit: 1 << len(fields), parse: parse,
			absentIfNull: sub != nil && sub.absentIfNull})
	}
	var required uint64
	for _, r := range n.required {
		found := false
		for _, f := range fields {
			if f.name == r {
				required |= f.bit
				found = true
			}
		}
		if !found {
			return nil // a required key no field fills
		}
	}
	return func(c *scanner, dst reflect.Value, depth int) bool {
		if c.peek() != '{' || depth >= MaxDepth {
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
				var f *directField
				for i := range fields {
					if fields[i].name == k {
						f = &fields[i]
						break
					}
				}
				if f == nil || got&f.bit != 0 {
					return false // an unknown key, or a key twice
				}
				got |= f.bit
				c.space()
				if c.peek() != ':' {
					return false
				}
				c.i++
				c.space()
				if strings.HasPrefix(c.s[c.i:], "null") {
					// A strict tool's null for an optional field it
					// did not send is its absence (nullPlan.strip);
					// any other null takes the general path.
					if !f.absentIfNull {
						return false
					}
					c.i += 4
				} else {
					if !f.parse(c, dst.Field(f.index), depth+1) {
						return false
					}
					present |= f.bit
				}
				if more, ok = c.next('}'); !ok {
					return false
				}
			}
		}
		return present&required == required
	}
}

func compileDirectSlice(n *fastNode, plan *nullPlan, t reflect.Type, seen map[reflect.Type]bool) direct {
	if t.Elem().Kind() == reflect.Uint8 || n.types != 0 && n.types&typeArray == 0 || n.enum != nil || n.hasConst || n.format != nil {
		return nil
	}
	items := n.items
	if items == nil {
		items = &fastNode{minLen: -1, maxLen: -1, maxItems: -1} // any element
	}
	var sub *nullPlan
	if plan != nil {
		sub = plan.items
	}
	elem := compileDirect(items, sub, t.Elem(), seen)
	if elem == nil {
		return nil
	}
	return func(c *scanner, dst reflect.Value, depth int) bool {
		if c.peek() != '[' || depth >= MaxDepth {
			return false
		}
		// Counted first, so that the slice is made once at its size.
		count, ok := c.countElements()
		if !ok || count < n.minItems || n.maxItems >= 0 && count > n.maxItems {
			return false
		}
		s := reflect.MakeSlice(t, count, count)
		c.i++
		c.space()
		for i := range count {
			if !elem(c, s.Index(i), depth+1) {
				return false
			}
			if more, ok := c.next(']'); !ok || more != (i < count-1) {
				return false
			}
		}
		if count == 0 {
			c.i++ // ]
		}
		dst.Set(s)
		return true
	}
}

// countElements counts the elements of the array at c without moving c:
// the elements are checked when they are parsed.
func (c *scanner) countElements() (int, bool) {
	d := decoder{s: c.s, i: c.i + 1}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		return 0, true
	}
	n := 0
	for {
		if !skipValue(&d, 0) {
			return 0, false
		}
		n++
		d.space()
		if d.i >= len(d.s) {
			return 0, false
		}
		switch d.s[d.i] {
		case ',':
			d.i++
			d.space()
		case ']':
			return n, true
		default:
			return 0, false
		}
	}
}

// skipValue moves d past one value without building it.
func skipValue(d *decoder, depth int) bool {
	if d.i >= len(d.s) || depth > MaxDepth {
		return false
	}
	switch c := d.s[d.i]; c {
	case '"':
		c := scanner{s: d.s, i: d.i}
		if _, ok := c.str(); !ok {
			return false
		}
		d.i = c.i
		return true
	case '{', '[':
		closing := byte('}')
		if c == '[' {
			closing = ']'
		}
		d.i++
		d.space()
		if d.i < len(d.s) && d.s[d.i] == closing {
			d.i++
			return true
		}
		for {
			if c == '{' {
				k := scanner{s: d.s, i: d.i}
				if _, ok := k.str(); !ok {
					return false
				}
				d.i = k.i
				d.space()
				if d.i >= len(d.s) || d.s[d.i] != ':' {
					return false
				}
				d.i++
				d.space()
			}
			if !skipValue(d, depth+1) {
				return false
			}
			d.space()
			if d.i >= len(d.s) {
				return false
			}
			switch d.s[d.i] {
			case ',':
				d.i++
				d.space()
			case closing:
				d.i++
				return true
			default:
				return false
			}
		}
	}
	_, err := d.value(depth)
	return err == nil
}

// constEnumAllow reports whether n's const and enum (where set) both
// admit the value that same recognises.
func (n *fastNode) constEnumAllow(same func(any) bool) bool {
	if n.hasConst && !same(n.constVal) {
		return false
	}
	return n.enum == nil || slices.ContainsFunc(n.enum, same)
}

// directString checks a string against n as validate would.
func (n *fastNode) directString(s string) bool {
	if n.types != 0 && n.types&typeString == 0 {
		return false
	}
	if !n.constEnumAllow(func(e any) bool { c, ok := e.(string); return ok && c == s }) {
		return false
	}
	if n.format != nil && !n.format(s) {
		return false
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCountInString(s)
		if l < n.minLen || n.maxLen >= 0 && l > n.maxLen {
			return false
		}
	}
	return n.pattern == nil || n.pattern.MatchString(s)
}

func (n *fastNode) directBool(b bool) bool {
	if n.types != 0 && n.types&typeBool == 0 {
		return false
	}
	if !n.constEnumAllow(func(e any) bool { c, ok := e.(bool); return ok && c == b }) {
		return false
	}
	return n.format == nil || n.format(b)
}

// directNumber checks a number (a usable literal) against n as validate
// would.
func (n *fastNode) directNumber(v json.Number) bool {
	if n.types != 0 && n.types&typeNumber == 0 && (n.types&typeInteger == 0 || !isIntegral(v)) {
		return false
	}
	if n.hasConst && !jsonEqual(v, n.constVal) {
		return false
	}
	if n.enum != nil && !slices.ContainsFunc(n.enum, func(e any) bool { c, ok := e.(json.Number); return ok && compareNumbers(v, c) == 0 }) {
		return false
	}
	if n.format != nil && !n.format(v) {
		return false
	}
	if n.min != nil {
		if c := compareNumbers(v, n.min.n); c < 0 || c == 0 && n.min.exclusive {
			return false
		}
	}
	if n.max != nil {
		if c := compareNumbers(v, n.max.n); c > 0 || c == 0 && n.max.exclusive {
			return false
		}
	}
	return true
}

// plainFields reports whether t's JSON keys are its own fields' names,
// no two alike ignoring case and none embedded: encoding/json's rules
// for those (which of two fields wins, promoted fields) are left to the
// general path.
func plainFields(t reflect.Type) bool {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous {
			return false
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		for _, n := range names {
			if strings.EqualFold(n, name) {
				return false
			}
		}
		names = append(names, name)
	}
	return true
}
