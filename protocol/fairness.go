package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Protocol 1.2: fair share. A step's context.fairness names the share it
// draws from; without one, the share is the agent's own with weight 1.
const (
	// MinFairWeight and MaxFairWeight bound context.fairness.weight.
	MinFairWeight = 0.01
	MaxFairWeight = 100
	// MaxFairKey is the longest fairness key, in bytes.
	MaxFairKey = 64
)

// Fairness is a step's context.fairness (protocol 1.2): steps with the
// same Key share one share of the fleet, served in proportion to Weight
// under contention. The zero value is the default: the agent's own key,
// weight 1.
type Fairness struct {
	// Key is 1-64 characters of [A-Za-z0-9_.:-]; empty means the step's
	// agent_id.
	Key string `json:"key,omitempty"`
	// Weight is from 0.01 to 100; zero means 1.
	Weight float64 `json:"weight,omitempty"`
}

// IsZero reports whether f is the default (nothing set).
func (f Fairness) IsZero() bool { return f.Key == "" && f.Weight == 0 }

// KeyFor is the share's key for a step of agentID: Key, or the agent.
func (f Fairness) KeyFor(agentID string) string {
	if f.Key != "" {
		return f.Key
	}
	return agentID
}

// EffectiveWeight is Weight, or 1 when unset.
func (f Fairness) EffectiveWeight() float64 {
	if f.Weight == 0 {
		return 1
	}
	return f.Weight
}

var errFairnessType = errors.New(`context.fairness must be an object {"key": "<1-64 characters of [A-Za-z0-9_.:-]>", "weight": <0.01 to 100>}`)

// UnmarshalJSON reads the object strictly: unknown members, a key that is
// not a valid key, and a weight outside 0.01-100 are errors, so that a
// gateway's mistake is dead-lettered instead of silently sharing the
// wrong way. null is the default.
func (f *Fairness) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*f = Fairness{}
		return nil
	}
	if len(b) == 0 || b[0] != '{' {
		return errFairnessType
	}
	var w struct {
		Key    *string  `json:"key"`
		Weight *float64 `json:"weight"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("%w: %v", errFairnessType, err)
	}
	var out Fairness
	if w.Key != nil {
		if !ValidFairKey(*w.Key) {
			return fmt.Errorf("context.fairness.key %q is not 1-%d characters of [A-Za-z0-9_.:-]", clipText(*w.Key, MaxFairKey+8), MaxFairKey)
		}
		out.Key = *w.Key
	}
	if w.Weight != nil {
		v := *w.Weight
		if math.IsNaN(v) || v < MinFairWeight || v > MaxFairWeight {
			return fmt.Errorf("context.fairness.weight %v is not from %v to %v", v, MinFairWeight, MaxFairWeight)
		}
		out.Weight = v
	}
	*f = out
	return nil
}

// ValidFairKey reports whether s is a fairness key: 1-64 characters of
// [A-Za-z0-9_.:-].
func ValidFairKey(s string) bool {
	if len(s) == 0 || len(s) > MaxFairKey {
		return false
	}
	for i := range len(s) {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

// FairKey is the key of the share the step draws from (protocol 1.2).
func (s *Step) FairKey() string { return s.Context.Fairness.KeyFor(s.AgentID) }
