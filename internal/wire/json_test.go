package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/internal/wire"
)

func check(t *testing.T, s string, raw []byte) {
	t.Helper()
	want, _ := json.Marshal(s)
	if got := wire.AppendString([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Fatalf("AppendString(%q) = %s, json.Marshal = %s", s, got[1:], want)
	}
	for _, ss := range [][]string{nil, {}, {s}, {s, "a", s}} {
		want, _ := json.Marshal(ss)
		if got := wire.AppendStrings(nil, ss); !bytes.Equal(got, want) {
			t.Fatalf("AppendStrings(%q) = %s, json.Marshal = %s", ss, got, want)
		}
	}
	want, werr := json.Marshal(json.RawMessage(raw))
	got, ok := wire.AppendRaw([]byte("x"), raw)
	if ok && (werr != nil || !bytes.Equal(got, append([]byte("x"), want...))) {
		t.Fatalf("AppendRaw(%q) = %s; json.Marshal = %s, %v", raw, got, want, werr)
	}
}

// What the appenders write is what json.Marshal writes; what AppendRaw does not
// take, json.Marshal may write otherwise or refuse.
func TestIsMarshal(t *testing.T) {
	for _, s := range []string{"", "c1", "a\"b", `back\slash`, "<script>&", "tab\there", "\x00\x1f\x7f", "é", "\u2028\u2029", "\xff\xfe", "ok~.-_:/"} {
		check(t, s, []byte(s))
	}
	for _, raw := range []string{`{"a":1}`, ` { "a" : [ 1 , 2 ] } `, `"<&>"`, `null`, `{"a":`, `1 2`, "\"\xff\"", `"\u2028"`,
		`-`, `01`, `1.`, `1e`, `-0.0e+5`, `1E-2`, `"\u00zz"`, `"\u00e9\n\/"`, `"\x"`, "\"a\x01\"", `{"a":1}x`, `[1,]`, `{"a":1,}`, `{"a"}`, `{1:2}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`tru`, `nulll`, `[true,false,null,{},[],"",0,-1.5]`, `{"a":{"b":[{"c":"d"}]}}`, `""`, `"`} {
		check(t, "", []byte(raw))
	}
	check(t, "", nil)
	check(t, "", []byte{})
	if _, ok := wire.AppendRaw(nil, json.RawMessage(` { "a" : [ 1 , 2 ] } `)); !ok {
		t.Fatal("AppendRaw did not take JSON with spaces")
	}
}

func FuzzIsMarshal(f *testing.F) {
	f.Add("c1", []byte(`{"type":"function_call_output","call_id":"c1","output":"pong"}`))
	f.Add("<&>\u2028\xff", []byte(` [ 1 , "\u003c" ] `))
	f.Add("", []byte(`[true,false,null,{},[],"",0,-1.5e+3,{"a":{"b":[{"c":"\u00e9\n"}]}}]`))
	f.Fuzz(func(t *testing.T, s string, raw []byte) { check(t, s, raw) })
}
