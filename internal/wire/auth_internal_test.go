package wire

import (
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

// auth.required is written as json.Marshal writes it, byte for byte.
func TestAuthRequiredIsMarshal(t *testing.T) {
	for _, s := range []string{"", "c1", "a\"b", "<script>&", "\x00\x1f", "\u2028", "\xff", "https://console.example/connect/github?key=tenant-42&x=1"} {
		checkMarshalEvent(t, &protocol.AuthRequiredEvent{Type: protocol.EventAuthRequired, AgentID: s, TurnID: s, Step: 7, CallID: s, Server: s, URL: s})
	}
	checkMarshalEvent(t, (*protocol.AuthRequiredEvent)(nil))
}
