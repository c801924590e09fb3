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
// named. Of a single message whose keys are plain (not oddKeys), the
// method, params.requestId and params.taskId it reads are what
// encoding/json reads.
func FuzzCheckBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
		`{"id":123456789012345678901234567890}`, `{"id":1.5}`, `{"id":true}`, `{"id":null}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a\u0062"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"t1"}}`,
		`{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":7}}`,
		`{"method":"tools/call","Method":"tools/list"}`,
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
		var m struct {
			Method any `json:"method"`
			Params struct {
				RequestID any `json:"requestId"`
				TaskID    any `json:"taskId"`
			} `json:"params"`
		}
		if !info.batch && !info.oddKeys && json.Unmarshal(b, &m) == nil {
			if s, _ := m.Method.(string); s != info.method {
				t.Fatalf("method %q, encoding/json reads %v: %q", info.method, m.Method, b)
			}
			if _, isNum := m.Params.RequestID.(float64); isNum || info.requestID != nil {
				var got any
				if json.Unmarshal(info.requestID, &got) != nil || got != m.Params.RequestID {
					t.Fatalf("requestId %s, encoding/json reads %v: %q", info.requestID, m.Params.RequestID, b)
				}
			} else if _, isStr := m.Params.RequestID.(string); isStr {
				t.Fatalf("requestId missed, encoding/json reads %v: %q", m.Params.RequestID, b)
			}
			if s, isStr := m.Params.TaskID.(string); isStr != (info.taskIDKind == taskIDString) || s != info.taskID {
				t.Fatalf("taskId %q (%d), encoding/json reads %v: %q", info.taskID, info.taskIDKind, m.Params.TaskID, b)
			}
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
// found past the first few too. Each check of the big object reads all
// its keys (about 2 s under the race detector), so the big object is
// read twice: once whole, once with its last key twice; the keys twice
// near the switch from a list of keys to a set (16) are found in an
// object of 64 keys, which is past that switch as the big one is.
func TestCheckBodyManyKeys(t *testing.T) {
	t.Parallel()
	object := func(n int) []byte {
		var b bytes.Buffer
		b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"x","params":{`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Quote("k" + strconv.Itoa(i)))
			b.WriteString(":1")
		}
		return b.Bytes()
	}
	big := object(50000)
	ok := append(append([]byte(nil), big...), "}}"...)
	if _, err := checkBody(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		keys []byte
		key  string
	}{{object(64), "k0"}, {object(64), "k15"}, {object(64), "k16"}, {object(64), "k63"}, {big, "k49999"}} {
		dup := append(append([]byte(nil), c.keys...), `,"`+c.key+`":2}}`...)
		if _, err := checkBody(dup); err == nil || !strings.Contains(err.Error(), strconv.Quote(c.key)+" appears twice") {
			t.Errorf("%s twice: %v", c.key, err)
		}
	}
}
