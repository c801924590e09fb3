package mcpdoor

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzCheckBody: checkBody never panics; what it accepts is one JSON
// value, and an id it returns is a string or an int64 that the body
// named.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"id":123456789012345678901234567890}`, `{"id":1.5}`, `{"id":true}`, `{"id":null}`,
		`{"a":[[[[[[]]]]]]}`, `{} {}`, `[]`, `"x"`, "{\"a\":\"\xff\"}", `{"a":"\ud800"}`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := checkBody(b)
		id := info.id
		if err != nil {
			if _, ok := err.(*wireError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if len(bytes.TrimSpace(b)) > 0 && !json.Valid(b) {
			t.Fatalf("accepted and not valid JSON: %q", b)
		}
		if id == nil {
			return
		}
		var s string
		if json.Unmarshal(id, &s) == nil {
			return
		}
		if _, err := strconv.ParseInt(string(id), 10, 64); err != nil {
			t.Fatalf("id %s of %q is neither a string nor an int64", id, b)
		}
	})
}

// An object of many keys is checked in linear time, and a key twice is
// found past the first few too.
func TestCheckBodyManyKeys(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"x","params":{`)
	for i := range 50000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote("k" + strconv.Itoa(i)))
		b.WriteString(":1")
	}
	ok := append(append([]byte(nil), b.Bytes()...), "}}"...)
	if _, err := checkBody(ok); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k0", "k15", "k16", "k49999"} {
		dup := append(append([]byte(nil), b.Bytes()...), `,"`+k+`":2}}`...)
		if _, err := checkBody(dup); err == nil || !strings.Contains(err.Error(), "twice") {
			t.Errorf("%s twice: %v", k, err)
		}
	}
}
