package tool

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbull/toolruntime/internal/toolhooks"
)

func TestAgentCallFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  context.Context
		ok   bool
	}{
		{"no call", context.Background(), false},
		{"empty agent", context.WithValue(context.Background(), toolhooks.CallKey{}, Call{TurnID: "t1"}), false},
		{"invalid agent", context.WithValue(context.Background(), toolhooks.CallKey{}, Call{AgentID: "a b/c"}), false},
		{"agent", context.WithValue(context.Background(), toolhooks.CallKey{}, Call{AgentID: "agent-1", TurnID: "t1"}), true},
	} {
		c, err := AgentCallFrom(tc.ctx)
		if tc.ok {
			if err != nil || c.AgentID != "agent-1" {
				t.Errorf("%s: %+v, %v", tc.name, c, err)
			}
			continue
		}
		var te *Error
		if !errors.As(err, &te) || te.Kind != Internal {
			t.Errorf("%s: error %v, want an Internal tool error", tc.name, err)
		}
	}
}
