package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	invopop "github.com/invopop/jsonschema"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Params is the compiled parameter schema of one tool: the JSON sent to the
// provider, and the full schema every call's arguments are validated
// against. It is immutable and safe for concurrent use.
type Params struct {
	sent     json.RawMessage
	full     json.RawMessage
	compiled *jsonschema.Schema
	fast     *fastNode // nil when the schema uses keywords only the library knows
	nulls    *nullPlan // strict only: nulls that mean "absent"
	inexact  string    // strict only: why the sent schema accepts less than the full one
}

// ErrNotObject is wrapped by Compile when the root schema does not describe
// an object, which function-calling providers require.
var ErrNotObject = errors.New("function tool parameters must use a root object schema")

// Compile checks and compiles a raw JSON Schema. Every keyword is kept as
// given. With strict, the schema sent to the provider is rewritten into
// the strict subset (see makeStrict) while validation keeps using the
// schema as given; a schema that cannot be made strict is refused with the
// reason.
func Compile(raw json.RawMessage, strict bool) (*Params, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	full := json.RawMessage(compact.Bytes())
	tree, err := decodeOrdered(full)
	if err != nil {
		return nil, fmt.Errorf("schema is not valid JSON: %w", err)
	}
	root, ok := tree.(*object)
	if !ok || !isObjectSchema(root) {
		return nil, ErrNotObject
	}
	if err := schemaNumbers(root, ""); err != nil {
		return nil, fmt.Errorf("schema is not usable: %w", err)
	}
	compiled, err := compileSchema(full)
	if err != nil {
		return nil, err
	}
	p := &Params{sent: full, full: full, compiled: compiled, fast: compileFast(root)}
	if strict {
		// The tree is marshalled before and after the rewrite: comparing
		// the rewrite with the raw bytes would see a change in every
		// string that marshals differently (\u00e9, \/, <), not only in
		// what makeStrict changed.
		given, err := json.Marshal(root)
		if err != nil {
			return nil, err
		}
		if open := openObjects(root, "", nil); len(open) > 0 {
			p.inexact = "strict mode closes the open object at " + strings.Join(open, ", ") +
				", which then accepts no property it does not list"
		}
		nulls := &nullPlan{}
		var lost []string
		if err := makeStrict(root, "", nulls, &lost); err != nil {
			return nil, fmt.Errorf("schema cannot be made strict: %w", err)
		}
		if len(lost) > 0 {
			if p.inexact != "" {
				p.inexact += "; "
			}
			p.inexact += "strict mode makes the optional property at " + strings.Join(lost, ", ") +
				" required and nullable, and the null the model must then send is refused by the full schema"
		}
		sent, err := json.Marshal(root)
		if err != nil {
			return nil, err
		}
		// A schema that already fits the strict subset goes out byte for
		// byte as its owner wrote it.
		if !bytes.Equal(sent, given) {
			p.sent = sent
		}
		if !nulls.empty() {
			p.nulls = nulls
		}
	}
	return p, nil
}

// compileSchema compiles a schema in isolation: remote references are
// refused, so a schema that came from a model or a message can never make
// the worker fetch a URL or read a file.
func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("remote reference %q is not allowed", s)
	}
	const url = "mem://params.json"
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("schema is not usable: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema is not usable: %w", err)
	}
	return s, nil
}

// Sent is the schema as the provider sees it.
func (p *Params) Sent() json.RawMessage { return p.sent }

// StrictInexact says, for a schema compiled strict, why the schema sent
// accepts less than the full one (an object without additionalProperties
// is closed); it is empty when strict mode expresses the schema exactly.
func (p *Params) StrictInexact() string { return p.inexact }

// Full is the schema arguments are validated against.
func (p *Params) Full() json.RawMessage { return p.full }

// inferred caches schemas derived from Go types. Inference is pure and
// costly (reflection), so it runs once per type and mode for the life of
// the process; the cache holds no other state.
var inferred sync.Map // inferKey → inferResult

type inferKey struct {
	t      reflect.Type
	strict bool
}

type inferResult struct {
	p   *Params
	err error
}

// For returns the compiled schema of T, inferred from its fields with
// their json and jsonschema struct tags (description, minimum, maximum,
// enum, pattern, format, …), or a jsonschema tag without "=" read whole as
// the description, as the MCP Go SDK does; a tag it would drop part of is
// refused. Fields without omitempty are required.
func For[T any](strict bool) (*Params, error) {
	t := reflect.TypeFor[T]()
	key := inferKey{t, strict}
	if r, ok := inferred.Load(key); ok {
		r := r.(inferResult)
		return r.p, r.err
	}
	p, err := infer(t, strict)
	// Two first calls may race; both get the result stored first, so a
	// type always has exactly one *Params.
	r, _ := inferred.LoadOrStore(key, inferResult{p, err})
	return r.(inferResult).p, r.(inferResult).err
}

func infer(t reflect.Type, strict bool) (*Params, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w (parameters type %s is not a struct)", ErrNotObject, t)
	}
	if err := checkTags(t, t.Name(), map[reflect.Type]bool{}); err != nil {
		return nil, err
	}
	// A tag in the MCP Go SDK's form is the description (tags.go).
	r := &invopop.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true, LookupComment: fieldDescription}
	s := r.ReflectFromType(t)
	s.Version = ""
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	return Compile(raw, strict)
}

// Violation is one way the arguments break the schema.
type Violation struct {
	Pointer string `json:"pointer"` // JSON pointer into the arguments; "" is the root
	Message string `json:"message"`
}

// ValidationError lists every violation found in one value.
type ValidationError struct {
	Violations []Violation
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		ptr := v.Pointer
		if ptr == "" {
			ptr = "(root)"
		}
		b.WriteString(ptr)
		b.WriteString(": ")
		b.WriteString(v.Message)
	}
	return b.String()
}

// Validate checks a decoded JSON value (as produced by a json.Decoder with
// UseNumber) against the full schema. Numbers outside the supported range
// (see usableNumber) are violations.
func (p *Params) Validate(v any) error {
	return p.validate(v, true)
}

// validate is Validate; checkNumbers false skips the walk for numbers out
// of range, for a value the parser has already found none in.
func (p *Params) validate(v any, checkNumbers bool) error {
	if checkNumbers && hasUnusableNumber(v) {
		return &ValidationError{Violations: numberViolations(v, "", nil)}
	}
	if p.fast != nil {
		at := paths.Get().(*path)
		out := p.fast.validate(v, at, nil)
		at.tokens = at.tokens[:0]
		paths.Put(at)
		if out == nil {
			return nil
		}
		sortViolations(out)
		return &ValidationError{Violations: out}
	}
	return p.validateFull(v)
}

// validateFull validates with the general validator.
func (p *Params) validateFull(v any) error {
	err := p.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Violations: []Violation{{Message: err.Error()}}}
	}
	return &ValidationError{Violations: violations(ve)}
}

// violations flattens the library's error tree into its leaves: the
// intermediate nodes only say "doesn't validate with …".
func violations(ve *jsonschema.ValidationError) []Violation {
	var out []Violation
	seen := map[Violation]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			// The library writes pointers as URI fragments ("/a%20b");
			// the model reads plain JSON pointers ("/a b").
			ptr := e.InstanceLocation
			if u, err := url.PathUnescape(ptr); err == nil {
				ptr = u
			}
			v := Violation{Pointer: ptr, Message: e.Message}
			if !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sortViolations(out)
	return out
}

// sortViolations orders violations by pointer, then message: validators
// walk properties in map order, and the message the model reads should be
// the same for the same arguments.
func sortViolations(out []Violation) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pointer != out[j].Pointer {
			return out[i].Pointer < out[j].Pointer
		}
		return out[i].Message < out[j].Message
	})
}

// Parsed is a call's arguments after repair, null stripping and validation.
type Parsed struct {
	// JSON is the validated arguments, numbers as the model wrote them
	// (encoding/json refuses 2e2 for a Go integer: tools decode through
	// ParseValue's Bind or Value.Unmarshal, which take it).
	JSON []byte
	// Repairs names the ladder rungs that made the arguments parse.
	Repairs []string
}

// Parse turns the model's argument string into validated JSON: the repair
// ladder if it does not parse, then (strict tools) nulls that stand for
// absent optional fields removed, then validation against the full schema.
// Arguments that needed no change come back as sent.
func (p *Params) Parse(args string, opt RepairOptions) (Parsed, error) {
	v, text, rungs, changed, err := p.parse(args, opt)
	if err != nil {
		return Parsed{Repairs: rungs}, err
	}
	data := []byte(text)
	if changed {
		if data, err = json.Marshal(v); err != nil {
			return Parsed{Repairs: rungs}, err
		}
	}
	return Parsed{JSON: data, Repairs: rungs}, nil
}

// ParseValue is Parse without the final encoding: it returns the
// validated value (the shapes a json.Decoder with UseNumber produces,
// integral numbers in integer form), for Bind, and its JSON on demand.
func (p *Params) ParseValue(args string, opt RepairOptions) (Value, []string, error) {
	v, text, rungs, changed, err := p.parse(args, opt)
	return Value{V: v, text: text, changed: changed}, rungs, err
}

// Value is a parsed, validated argument value.
type Value struct {
	V       any
	text    string
	changed bool
}

// JSON is the value as JSON text: the arguments as sent (trimmed) when
// nothing had to change, so raw values keep their key order.
func (v Value) JSON() ([]byte, error) {
	if !v.changed {
		return []byte(v.text), nil
	}
	return json.Marshal(v.V)
}

// Unmarshal decodes the value's JSON into dst with encoding/json, for the
// types Bind does not cover. Numbers are passed as written; only if
// encoding/json then refuses a number for a Go integer (2e2, 1.0) is it
// decoded again with integral numbers in integer form, their value and
// the sign of a zero kept.
func (v Value) Unmarshal(dst any) error {
	data, err := v.JSON()
	if err != nil {
		return err
	}
	err = json.Unmarshal(data, dst)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || !strings.HasPrefix(te.Value, "number") {
		return err
	}
	w := deepCopy(v.V)
	if n, ok := w.(json.Number); ok {
		if i, ok := integerForm(n); ok {
			w = i
		}
	} else if !integralNumbers(w) {
		return err
	}
	if data, err = json.Marshal(w); err != nil {
		return err
	}
	return json.Unmarshal(data, dst)
}

func (p *Params) parse(args string, opt RepairOptions) (v any, text string, rungs []string, changed bool, err error) {
	var notes decodeNotes
	v, notes, err = decodeAnyNotes(args)
	if _, isString := v.(string); isString && err == nil {
		// Perhaps a double-encoded object: the ladder decides.
		err = errSyntax
	}
	switch {
	case err == nil:
		text = trimSpace(args)
	case strings.TrimSpace(args) == "":
		v, text = map[string]any{}, "{}"
	default:
		var data []byte
		if data, rungs, err = Repair(args, opt); err != nil {
			return nil, "", rungs, false, err
		}
		text = string(data)
		if v, notes, err = decodeAnyNotes(text); err != nil {
			return nil, "", rungs, false, fmt.Errorf("%w: %v", ErrUnparseable, err)
		}
	}
	if notes.duplicateKey {
		// Which of the two values counts is up to whoever reads the text:
		// the model is asked to say once what it means.
		return nil, "", rungs, false, &ValidationError{Violations: []Violation{{
			Pointer: duplicateKey(text), Message: "this key appears more than once in its object; send each key once"}}}
	}
	changed = p.nulls != nil && p.nulls.strip(v)
	// An exponent can put a short number out of range too.
	if err := p.validate(v, notes.long || notes.fractionOrExponent); err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return nil, "", rungs, false, err
		}
		nv, inner, ok := p.decodeNested(v, ve)
		if !ok {
			return nil, "", rungs, false, err
		}
		v, changed, rungs = nv, true, withRung(rungs, RungDoubleEncoded)
		notes.fractionOrExponent = notes.fractionOrExponent || inner.fractionOrExponent
	}
	// Numbers stay as the model wrote them (2e2, -0.0): Bind and
	// Value.Unmarshal store an integral one in a Go integer.
	return v, text, rungs, changed, nil
}

// Bounds of the numbers Validate accepts. The validator turns numbers into
// exact big.Rat values, whose cost grows with the exponent (a few numbers
// like 1e999999 in a call would hold a core), and an exponent past a
// million makes it panic. No Go number type holds such values anyway.
const (
	maxNumberChars    = 400
	maxNumberExponent = 400
)

// usableNumber reports whether a JSON number literal is within the bounds
// above and the range of a float64.
func usableNumber(n string) bool {
	if len(n) > maxNumberChars {
		return false
	}
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e, err := strconv.Atoi(n[i+1:])
		if err != nil || e < -maxNumberExponent || e > maxNumberExponent {
			return false
		}
	}
	_, err := strconv.ParseFloat(n, 64)
	return err == nil
}

func hasUnusableNumber(v any) bool {
	switch v := v.(type) {
	case json.Number:
		return !usableNumber(string(v))
	case map[string]any:
		for _, e := range v {
			if hasUnusableNumber(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasUnusableNumber(e) {
				return true
			}
		}
	}
	return false
}

// numberViolations lists the unusable numbers of v, in pointer order.
func numberViolations(v any, ptr string, out []Violation) []Violation {
	switch v := v.(type) {
	case json.Number:
		if !usableNumber(string(v)) {
			out = append(out, Violation{Pointer: ptr, Message: "number is out of the supported range"})
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = numberViolations(v[k], ptr+"/"+escape(k), out)
		}
	case []any:
		for i, e := range v {
			out = numberViolations(e, ptr+"/"+strconv.Itoa(i), out)
		}
	}
	return out
}

// schemaNumbers refuses a schema holding a number Validate would refuse:
// the validator would hit the same limits comparing against it.
func schemaNumbers(v any, path string) error {
	switch v := v.(type) {
	case json.Number:
		if !usableNumber(string(v)) {
			return fmt.Errorf("the number at #%s is out of the supported range", path)
		}
	case *object:
		for _, k := range v.keys {
			if err := schemaNumbers(v.vals[k], path+"/"+escape(k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := schemaNumbers(e, path+"/"+strconv.Itoa(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// integralNumbers rewrites, in place, integral numbers written with a
// fraction or an exponent (1.0, 2e1) in plain integer form. JSON Schema
// counts them as integers, but encoding/json refuses them for a Go integer
// field; only Value.Unmarshal uses it, on a copy, after such a refusal.
// It reports whether it rewrote anything.
func integralNumbers(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if n, ok := e.(json.Number); ok {
				if i, ok := integerForm(n); ok {
					v[k] = i
					changed = true
				}
			} else if integralNumbers(e) {
				changed = true
			}
		}
	case []any:
		for k, e := range v {
			if n, ok := e.(json.Number); ok {
				if i, ok := integerForm(n); ok {
					v[k] = i
					changed = true
				}
			} else if integralNumbers(e) {
				changed = true
			}
		}
	}
	return changed
}

// integerForm returns n as a plain integer literal when n is integral,
// fits 64 bits and is not written that way already.
func integerForm(n json.Number) (json.Number, bool) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return n, false
	}
	if len(s) > maxNumberChars {
		return n, false
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		// 1e400000000 would make big.Rat build a huge integer.
		if e, err := strconv.Atoi(s[i+1:]); err != nil || e < -maxNumberExponent || e > maxNumberExponent {
			return n, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() || r.Num().BitLen() > 64 {
		return n, false
	}
	if r.Sign() == 0 && strings.HasPrefix(s, "-") {
		return "-0", true // its sign kept for a float
	}
	return json.Number(r.Num().String()), true
}

// trimSpace trims JSON white space.
func trimSpace(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
