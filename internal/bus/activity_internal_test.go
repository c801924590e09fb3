package bus

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// Activity events are written as json.Marshal writes them.
func TestActivityEncodeIsMarshal(t *testing.T) {
	hostile := []string{"", "c1", "a\"b", "<&>", "\x00", "\u2028", "\xff", "é"}
	for _, s := range hostile {
		for _, a := range []protocol.Activity{
			{CallID: s, Name: s, State: "started", Label: s},
			{CallID: "c", State: "progress", Label: s, Progress: &protocol.Progress{}},
		} {
			want, _ := json.Marshal(a)
			got, err := encodeActivity(a)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("encodeActivity(%+v) = %s, %v; json.Marshal = %s", a, got, err, want)
			}
			if got, err = appendActivity([]byte("pre"), a); err != nil || string(got) != "pre"+string(want) {
				t.Fatalf("appendActivity(pre, %+v) = %s, %v; json.Marshal = %s", a, got, err, want)
			}
		}
	}
}

func FuzzActivityEncode(f *testing.F) {
	f.Add("done", "w1", "c1", `{"output":"x"}`)
	f.Add("", "<&>", "", `null`)
	f.Fuzz(func(t *testing.T, state, name, callID, label string) {
		a := protocol.Activity{CallID: callID, Name: name, State: state, Label: label}
		want, _ := json.Marshal(a)
		if got, _ := encodeActivity(a); !bytes.Equal(got, want) {
			t.Fatalf("encodeActivity = %s; json.Marshal = %s", got, want)
		}
	})
}
