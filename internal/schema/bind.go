package schema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
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
