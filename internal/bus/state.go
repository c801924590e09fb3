package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/turn"
)

// TurnState keeps per-turn and per-call state in the TURN_STATE bucket:
// call claims and stored outcomes (the journal that makes calls
// effectively-once), cancel marks, and the deferred tools a turn loaded.
type TurnState struct {
	KV jetstream.KeyValue
	// Worker names this worker in claims, for operators reading the bucket.
	Worker string
}

// callRecord is the value of a call key: a claim, then the outcome.
type callRecord struct {
	State   string        `json:"state"` // claimed | done
	Worker  string        `json:"worker,omitempty"`
	Outcome *turn.Outcome `json:"outcome,omitempty"`
}

// Claim implements turn.Journal with a create-only write.
func (s *TurnState) Claim(ctx context.Context, ref turn.CallRef) (*turn.Outcome, error) {
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	claim, _ := json.Marshal(callRecord{State: "claimed", Worker: s.Worker})
	_, err := s.KV.Create(ctx, key, claim)
	if err == nil {
		return nil, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil, err
	}
	e, err := s.KV.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	var rec callRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("call record %s is unreadable: %w", key, err)
	}
	if rec.State == "done" && rec.Outcome != nil {
		return rec.Outcome, nil
	}
	return nil, turn.ErrClaimed
}

// Store implements turn.Journal.
func (s *TurnState) Store(ctx context.Context, ref turn.CallRef, o *turn.Outcome) error {
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	data, err := json.Marshal(callRecord{State: "done", Worker: s.Worker, Outcome: o})
	if err != nil {
		return err
	}
	_, err = s.KV.Put(ctx, key, data)
	return err
}

type cancelMark struct {
	Reason string `json:"reason"`
}

// MarkCancelled records that the turn was cancelled.
func (s *TurnState) MarkCancelled(ctx context.Context, agentID, turnID, reason string) error {
	data, _ := json.Marshal(cancelMark{Reason: reason})
	_, err := s.KV.Put(ctx, protocol.TurnKey(agentID, turnID, "cancel"), data)
	return err
}

// Cancelled implements turn.State.
func (s *TurnState) Cancelled(ctx context.Context, agentID, turnID string) (bool, string, error) {
	e, err := s.KV.Get(ctx, protocol.TurnKey(agentID, turnID, "cancel"))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	var m cancelMark
	_ = json.Unmarshal(e.Value(), &m)
	return true, m.Reason, nil
}

// Loaded implements turn.State.
func (s *TurnState) Loaded(ctx context.Context, agentID, turnID string) (map[string]bool, error) {
	keys, _, err := s.loaded(ctx, agentID, turnID)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m, nil
}

func (s *TurnState) loaded(ctx context.Context, agentID, turnID string) ([]string, uint64, error) {
	e, err := s.KV.Get(ctx, protocol.TurnKey(agentID, turnID, "loaded"))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var keys []string
	if err := json.Unmarshal(e.Value(), &keys); err != nil {
		return nil, 0, err
	}
	return keys, e.Revision(), nil
}

// AddLoaded implements turn.State with a compare-and-set loop, so that
// two workers loading tools for one turn at once both count.
func (s *TurnState) AddLoaded(ctx context.Context, agentID, turnID string, add []string) error {
	key := protocol.TurnKey(agentID, turnID, "loaded")
	for range 10 {
		keys, rev, err := s.loaded(ctx, agentID, turnID)
		if err != nil {
			return err
		}
		for _, k := range add {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		data, _ := json.Marshal(keys)
		if rev == 0 {
			_, err = s.KV.Create(ctx, key, data)
		} else {
			_, err = s.KV.Update(ctx, key, data, rev)
		}
		if err == nil {
			return nil
		}
		// A lost compare-and-set: ErrKeyExists for Create, and for Update
		// ErrKeyRevisionMismatch (which covers the codes single-node and
		// replicated streams answer with).
		if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return err
		}
	}
	return fmt.Errorf("recording loaded tools for %s.%s: too much contention", agentID, turnID)
}
