package console

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func decode(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// FuzzFormatArgs: the shown arguments, folded lines unfolded, are the
// same JSON value as the stored ones, and every folded head is valid
// UTF-8 when the arguments are.
func FuzzFormatArgs(f *testing.F) {
	for _, s := range []string{`{"label":"deploy"}`, `{"note":"\u003cimg src=x onerror=alert(1)\u003e"}`, `{"a":"\\u003c","b":[1,2.5e3,null,true]}`,
		`{"long":"` + strings.Repeat("é", 300) + `"}`, `not json <b>`, `"\ud83d\ude00"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lines := formatArgs(b)
		var all []string
		for _, l := range lines {
			all = append(all, l.Text)
			if l.Long && utf8.Valid(b) && !utf8.ValidString(l.Head) {
				t.Fatalf("head %q is not valid UTF-8", l.Head)
			}
		}
		if !json.Valid(b) {
			return
		}
		shown := []byte(strings.Join(all, "\n"))
		if !json.Valid(shown) {
			t.Fatalf("shown %q is not JSON (from %q)", shown, b)
		}
		if !reflect.DeepEqual(decode(t, shown), decode(t, b)) {
			t.Fatalf("shown %q is another value than %q", shown, b)
		}
	})
}
