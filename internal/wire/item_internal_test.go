package wire

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

func FuzzFunctionOutput(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" backslash \\ slash /", "<b>&amp;</b>", "\x00\x01\x1f\x7f",
		"tab\tnl\ncr\r", "é ü 日本 😀", "\u2028\u2029", "\xff\xfe bad", "\xe2\x80"} {
		f.Add("call_1", s)
	}
	f.Fuzz(func(t *testing.T, callID, text string) {
		want, err := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID, Output: text})
		if err != nil {
			t.Fatal(err)
		}
		got := FunctionOutput(callID, text)
		if !bytes.Equal(got, want) {
			t.Fatalf("FunctionOutput(%q, %q)\n got %s\nwant %s", callID, text, got, want)
		}
		if len(text) <= maxExactText && cap(got) != len(got) {
			t.Fatalf("FunctionOutput(%q, %q): %d bytes in %d: not allocated at its size", callID, text, len(got), cap(got))
		}
	})
}
