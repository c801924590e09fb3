package turn

import (
	"context"
	"reflect"
	"testing"
	"unsafe"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// TestPendingReset fills every field of a step's record, the
// invocation's included, and checks that reset leaves it zero but for
// its state (set once per state), as clear did: resolve sets a record's
// fields one by one over a zero one. A field added to pending without a
// line in reset fails it, and so does one of a type fill does not know
// yet (add it there).
func TestPendingReset(t *testing.T) {
	type params struct {
		Text string `json:"text"`
	}
	tl := tool.Must(tool.Def[params]{
		Spec:     tool.Spec{Name: "echo", Description: "echoes"},
		Activity: func(p params) string { return "echoing " + p.Text },
		Execute: func(_ context.Context, p params) (tool.Result, error) {
			return tool.Result{Content: p.Text}, nil
		},
	})
	var p pending
	fill(t, reflect.ValueOf(&p).Elem(), "pending")
	if te := p.invocation.Prepare(tl, `{"text":"x"}`, 0); te != nil {
		t.Fatal(te)
	}
	p.invocation.Repairs = []string{"rung"}
	st := p.st
	p.reset()
	// st is the record's state for the state's life, and the
	// invocation's parameters stay parked for the next step: reset keeps
	// both.
	if p.st != st {
		t.Fatal("reset changed the record's state")
	}
	p.st = nil
	args := reflect.ValueOf(&p.invocation).Elem().FieldByName("args")
	if args.IsNil() {
		t.Fatal("reset dropped the invocation's parameters instead of parking them")
	}
	args = reflect.NewAt(args.Type(), unsafe.Pointer(args.UnsafeAddr())).Elem()
	args.SetZero()
	if !reflect.ValueOf(&p).Elem().IsZero() {
		t.Fatalf("reset left a field set: %+v", &p)
	}
	// The invocation's own fields, unexported, are checked by IsZero
	// above; Reset alone must zero them too.
	var inv tools.Invocation
	if te := inv.Prepare(tl, `{"text":"x"}`, 0); te != nil {
		t.Fatal(te)
	}
	inv.Reset()
	if !reflect.ValueOf(inv).IsZero() {
		t.Fatal("Invocation.Reset left a field set")
	}
}

// fill sets every field of v, recursively, to a value that is not zero.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if !v.CanSet() {
		v = reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem()
	}
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[tools.Invocation]() {
			return // filled by Prepare, which sets its unexported fields
		}
		for i := range v.NumField() {
			fill(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Interface:
		switch v.Type() {
		case reflect.TypeFor[context.Context]():
			v.Set(reflect.ValueOf(context.Background()))
		case reflect.TypeFor[trace.Span]():
			_, span := noop.NewTracerProvider().Tracer("t").Start(context.Background(), "s")
			v.Set(reflect.ValueOf(span))
		default:
			t.Fatalf("fill does not know the interface type %v of %s", v.Type(), path)
		}
	case reflect.Array:
		for i := range v.Len() {
			fill(t, v.Index(i), path)
		}
	default:
		t.Fatalf("fill does not know the kind %v of %s", v.Kind(), path)
	}
}
