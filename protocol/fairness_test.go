package protocol_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/protocol"
)

func TestParseStepFairness(t *testing.T) {
	parse := func(fairness string) (*protocol.Step, error) {
		return protocol.ParseStep(protocol.PrefixCall, subject, []byte(stepWith("context", `{"kind":"text","fairness":`+fairness+`}`)), 0)
	}
	good := []struct {
		fairness string
		key      string
		weight   float64
	}{
		{`null`, "a1", 1},
		{`{}`, "a1", 1},
		{`{"key":"tenant-42"}`, "tenant-42", 1},
		{`{"weight":2}`, "a1", 2},
		{`{"key":"org:team.prio_1-x","weight":0.01}`, "org:team.prio_1-x", 0.01},
		{`{"key":"` + strings.Repeat("k", 64) + `","weight":100}`, strings.Repeat("k", 64), 100},
	}
	for _, tt := range good {
		st, err := parse(tt.fairness)
		if err != nil {
			t.Errorf("%s: %v", tt.fairness, err)
			continue
		}
		if st.FairKey() != tt.key || st.Context.Fairness.EffectiveWeight() != tt.weight {
			t.Errorf("%s: key %q weight %v, want %q %v", tt.fairness, st.FairKey(), st.Context.Fairness.EffectiveWeight(), tt.key, tt.weight)
		}
	}
	st, err := protocol.ParseStep(protocol.PrefixCall, subject, []byte(stepWith("step", "1")), 0)
	if err != nil || st.FairKey() != "a1" || st.Context.Fairness.EffectiveWeight() != 1 {
		t.Errorf("a step without fairness: %v, %+v", err, st)
	}
	bad := []struct{ fairness, reason string }{
		{`"tenant"`, "context.fairness must be an object"},
		{`[]`, "context.fairness must be an object"},
		{`5`, "context.fairness must be an object"},
		{`{"key":""}`, `context.fairness.key "" is not 1-64`},
		{`{"key":"a b"}`, `context.fairness.key "a b"`},
		{`{"key":"a/b"}`, `context.fairness.key "a/b"`},
		{`{"key":"` + strings.Repeat("k", 65) + `"}`, "is not 1-64"},
		{`{"key":5}`, "context.fairness must be an object"},
		{`{"weight":0}`, "context.fairness.weight 0 is not from 0.01 to 100"},
		{`{"weight":0.001}`, "is not from 0.01 to 100"},
		{`{"weight":-1}`, "is not from 0.01 to 100"},
		{`{"weight":101}`, "is not from 0.01 to 100"},
		{`{"weight":1e400}`, "context.fairness must be an object"},
		{`{"weight":"2"}`, "context.fairness must be an object"},
		{`{"wieght":2}`, `unknown field "wieght"`},
	}
	for _, tt := range bad {
		st, err := parse(tt.fairness)
		if err == nil {
			t.Errorf("%s: accepted: %+v", tt.fairness, st.Context.Fairness)
			continue
		}
		if !errors.Is(err, protocol.ErrMalformed) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("%s: error %q, want ErrMalformed naming %q", tt.fairness, err, tt.reason)
		}
	}
}
