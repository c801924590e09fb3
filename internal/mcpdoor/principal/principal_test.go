package principal

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	sum := sha256.Sum256([]byte("tok"))
	h := hex.EncodeToString(sum[:])
	s, err := Parse([]byte(`{"principals":[{"name":"a","token_sha256":["` + h + `"],"agent_id":"a1","bindings":{"todo":true}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.ByToken("tok"); p == nil || p.AgentID != "a1" || !p.Context().Bindings["todo"] {
		t.Fatalf("ByToken: %+v", p)
	}
	if s.ByToken("other") != nil {
		t.Fatal("another token matched")
	}
	for _, bad := range []string{
		`{"principals":[{"name":"a","token_sha256":["` + h + `"],"agent_id":"a1","extra":1}]}`,
		`{"principals":[{"name":"a","agent_id":"a1"}]}`,
		`{"principals":[{"name":"a","token_sha256":["abc"],"agent_id":"a1"}]}`,
		`{"principals":[{"name":"a.b","token_sha256":["` + h + `"],"agent_id":"a1"}]}`,
		`{"principals":[{"name":"a","token_sha256":["` + h + `"],"agent_id":"a1"},{"name":"b","token_sha256":["` + h + `"],"agent_id":"b1"}]}`,
		`{"principals":[{"name":"a","jwt_sub":"x","agent_id":"a1"},{"name":"b","jwt_sub":"y","agent_id":"a1"}]}`,
		`{"principals":[{"name":"a","jwt_sub":"x","agent_id":"a1","fairness":{"key":"bad key"}}]}`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		} else if strings.Contains(err.Error(), h) {
			t.Errorf("error shows a hash: %v", err)
		}
	}
}
