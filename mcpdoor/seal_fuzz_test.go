package mcpdoor

import (
	"testing"
	"time"
)

// FuzzOpenState: no client-made requestState opens, and none panics.
// Only the state sealed here opens. Each fuzzing process seals its own
// (the nonce is random), so a text that opens is checked by what it
// holds, not compared with this process's text.
func FuzzOpenState(f *testing.F) {
	s, err := newSealer(make([]byte, SealKeyBytes))
	if err != nil {
		f.Fatal(err)
	}
	good := s.seal(approvalState{V: 1, Principal: "p", Expires: time.Now().Add(time.Hour).Unix()})
	f.Add(good)
	f.Add(good[:len(good)-1] + "A")
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		st, err := s.open(text, time.Now())
		if err == nil && (st.V != 1 || st.Principal != "p" || st.Agent != "" || st.CallID != "") {
			t.Fatalf("opened %q: %+v", text, st)
		}
	})
}

func TestSeal(t *testing.T) {
	s, _ := newSealer(make([]byte, SealKeyBytes))
	other, _ := newSealer([]byte("0123456789abcdef0123456789abcdef"))
	now := time.Now()
	st := approvalState{V: 1, Principal: "p", Agent: "a", Turn: "t", Step: 2, CallID: "c", Tool: "x", Expires: now.Add(time.Minute).Unix()}
	text := s.seal(st)
	if got, err := s.open(text, now); err != nil || got.Step != 2 || got.Principal != "p" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	if _, err := other.open(text, now); err == nil {
		t.Fatal("opened under another key")
	}
	if _, err := s.open(text, now.Add(2*time.Minute)); err == nil {
		t.Fatal("opened after expiry")
	}
}
