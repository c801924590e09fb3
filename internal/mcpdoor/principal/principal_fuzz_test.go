package principal

import (
	"testing"
)

// FuzzParse: a principals file never panics the door, and what it
// accepts has valid ids and finds its principals by token.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"principals":[{"name":"a","token_sha256":["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"],"agent_id":"a1","fairness":{"key":"t","weight":2},"bindings":{"web":true},"approval":"destructive","max_in_flight":3}]}`))
	f.Add([]byte(`{"principals":[{"name":"b","jwt_sub":"s","agent_id":"b1"}]}`))
	f.Add([]byte(`{"principals":[null]}`))
	f.Add([]byte(`{"principals":[{"name":"a","token_sha256":["zz"],"agent_id":"a1"}]} x`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			return
		}
		for _, p := range s.list {
			if p.Name == "" || p.AgentID == "" || len(p.hashes) != len(p.TokenSHA256) {
				t.Fatalf("accepted %+v", p)
			}
		}
		if p := s.ByToken("test"); p != nil && len(p.hashes) == 0 {
			t.Fatal("a principal without hashes matched a token")
		}
	})
}
