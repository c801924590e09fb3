package mcpdoor

import (
	"testing"
	"time"
)

// FuzzOpenTask: no client-made task id opens, and none panics; the one
// sealed here opens for its principal alone, and not as a requestState
// or a session id.
func FuzzOpenTask(f *testing.F) {
	s, err := newSealer(make([]byte, SealKeyBytes))
	if err != nil {
		f.Fatal(err)
	}
	alice := &Principal{Name: "alice", AgentID: "agent-alice"}
	bob := &Principal{Name: "bob", AgentID: "agent-bob"}
	now := time.Now()
	good := s.sealTask(taskState{V: 1, Principal: "alice", Agent: "agent-alice", Turn: "t1", Step: 3, CallID: "c1",
		Created: now.UnixMilli(), Expires: now.Add(time.Hour).UnixMilli()})
	if _, err := s.openTask(good, alice, now); err != nil {
		f.Fatalf("the sealed id: %v", err)
	}
	if _, err := s.openTask(good, bob, now); err == nil {
		f.Fatal("opened for another principal")
	}
	if _, err := s.openTask(good, alice, now.Add(2*time.Hour)); err == nil {
		f.Fatal("opened after expiry")
	}
	other, _ := newSealer([]byte("0123456789abcdef0123456789abcdef"))
	if _, err := other.openTask(good, alice, now); err == nil {
		f.Fatal("opened under another key")
	}
	if _, err := s.open(good, now); err == nil {
		f.Fatal("a task id opened as a requestState")
	}
	f.Add(good)
	f.Add(good[:len(good)-1] + "A")
	f.Add(s.seal(approvalState{V: 1, Principal: "alice", Expires: now.Add(time.Hour).Unix()}))
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		st, err := s.openTask(text, alice, now)
		if err == nil && (st.Principal != "alice" || st.Turn != "t1" || st.Step != 3 || st.CallID != "c1") {
			t.Fatalf("opened %q: %+v", text, st)
		}
		if _, err := s.openTask(text, bob, now); err == nil {
			t.Fatalf("opened %q for bob", text)
		}
	})
}
