package console

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzMembers: on valid JSON, members reads what json.Unmarshal into a
// map of raw values reads (the last of a name, escapes in names
// decoded, each value's bytes), for the event and each of its members
// (progress, error), and elements counts what json.Unmarshal into a
// slice counts. Names of invalid UTF-8, which Unmarshal makes U+FFFD,
// are left out: renderLive looks up ASCII names only.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(` { "t\u0079pe" : "step.pending" , "approvals" : [ {"a":[1,{}]} , "x\"]" , [] ] , "type":"step.done","items":[[],{},"]",-1e5,true,null] } `))
	f.Add([]byte(`{"type":"call.output","error":{"kind":"k","kind":0},"status":null,"duration_ms":0.0,"step":[1, 2 ,{"a" : "b"}],"":{}}`))
	f.Add([]byte(`[1,[2,3],"a,b",{"c":[]}]`))
	f.Add([]byte(`"\\\""`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !utf8.Valid(data) {
			return
		}
		check := func(raw []byte) {
			var want map[string]json.RawMessage
			_ = json.Unmarshal(raw, &want)
			got := members(raw)
			if len(got) != len(want) || (got == nil) != (want == nil) {
				t.Fatalf("%s: members %q, Unmarshal %q", raw, got, want)
			}
			for k, v := range want {
				if !bytes.Equal(got[k], v) {
					t.Fatalf("%s: member %q is %q, Unmarshal %q", raw, k, got[k], v)
				}
			}
			var a []json.RawMessage
			_ = json.Unmarshal(raw, &a)
			if n := elements(raw); n != len(a) {
				t.Fatalf("%s: %d elements, Unmarshal %d", raw, n, len(a))
			}
		}
		check(data)
		for _, v := range members(data) {
			check(v)
		}
	})
}
