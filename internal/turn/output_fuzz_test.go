package turn

import (
	"bytes"
	"testing"

	"github.com/agentbull/toolruntime/internal/wire"
)

// FuzzFunctionOutputAgrees holds functionOutput's copied items to
// wire.FunctionOutput's encoded ones, byte for byte, and its plain test
// to the bytes the encoder leaves as they are.
func FuzzFunctionOutputAgrees(f *testing.F) {
	for _, s := range []string{"", "ok", "c0", "call_9fK2", `a"b`, `a\b`, "<&>", "\x7f", "\x1f", "é", "\u2028", "\xff", "line\nbreak", " ~"} {
		f.Add(s, s)
		f.Add("c0", s)
	}
	f.Fuzz(func(t *testing.T, callID, text string) {
		want := wire.FunctionOutput(callID, text)
		// Alone, and from a step's slab beside another item.
		slab := &stepState{itemsFor: 2}
		for _, st := range []*stepState{{}, slab, slab} {
			got := functionOutput(st, callID, text)
			if !bytes.Equal(got, want) {
				t.Fatalf("functionOutput(%.64q, %.64q) = %.200s, want %.200s", callID, text, got, want)
			}
			if plainJSON(callID) && plainJSON(text) && cap(got) != len(got) {
				t.Fatalf("functionOutput(%.64q, %.64q): capacity %d past its %d bytes", callID, text, cap(got), len(got))
			}
		}
		if plain := wire.AppendString(nil, text); plainJSON(text) && string(plain) != `"`+text+`"` {
			t.Fatalf("plainJSON(%.64q) but it is written %.200s", text, plain)
		}
	})
}

// TestPlainJSONBytes: every byte the encoder writes as it is, and no
// other, is plain.
func TestPlainJSONBytes(t *testing.T) {
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		asIs := string(wire.AppendString(nil, s)) == `"`+s+`"` && c < 0x80
		if plainJSON(s) != asIs {
			t.Errorf("byte %#x: plain %v, written as it is %v", c, plainJSON(s), asIs)
		}
	}
}
