package turnstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/pause"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// Store keeps per-turn and per-call state in the TURN_STATE bucket:
// call claims and stored outcomes (the journal that makes calls
// effectively-once), cancel marks, and the deferred tools a turn loaded.
type Store struct {
	KV jetstream.KeyValue
	// Pub writes call keys, with its retries and attempt timeout.
	Pub *bus.Publisher
	// Worker names this worker in claims, for operators reading the bucket.
	Worker string

	// cancelled mirrors the bucket's cancel marks once WatchCancels has
	// loaded them, so that a step's cancel check costs no round trip.
	mu        sync.RWMutex
	cancelled map[string]string // "<agent>.<turn>" → reason
	watching  bool
}

// callRecord is the value of a call key: a claim, then the outcome.
type callRecord struct {
	State   string        `json:"state"` // claimed | done
	Worker  string        `json:"worker,omitempty"`
	Claim   string        `json:"claim,omitempty"` // a claim's unique id
	Outcome *turn.Outcome `json:"outcome,omitempty"`
	// Digest is the claimed call's protocol.CallDigest ("" in records
	// written before digests were kept, which match any call).
	Digest string `json:"digest,omitempty"`
}

// reused reports whether rec is the claim of another call than ref's.
func (rec *callRecord) reused(ref turn.JournalRef) bool {
	return rec.Digest != "" && ref.Digest != "" && rec.Digest != ref.Digest
}

// Claim implements turn.Journal with a create-only write.
func (s *Store) Claim(ctx context.Context, ref turn.JournalRef) (*turn.Outcome, error) {
	// The claim carries its own id: when a write is retried after its
	// acknowledgement was lost, the key holds this very claim, which is
	// not an earlier attempt's.
	return s.claim(ctx, ref, nuid.Next())
}

// claimAttempts bounds the claims of one call that find its key taken
// and then cannot read it.
const claimAttempts = 5

func (s *Store) claim(ctx context.Context, ref turn.JournalRef, id string) (*turn.Outcome, error) {
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	claim, _ := (&callRecord{State: "claimed", Worker: s.Worker, Claim: id, Digest: ref.Digest}).encode()
	e, err := s.create(ctx, key, claim)
	if err != nil || e == nil {
		return nil, err
	}
	rec, err := readRecord(key, e)
	if err != nil {
		return nil, err
	}
	if rec.reused(ref) {
		return nil, turn.ErrReused
	}
	if rec.State == "done" && rec.Outcome != nil {
		if turn.Resumes(ctx, ref, rec.Outcome) { // a call held for input resumes (approval.go)
			return nil, s.reclaim(ctx, key, e.Revision(), claim)
		}
		return rec.Outcome, nil
	}
	if rec.Claim == id {
		return nil, nil
	}
	return nil, turn.ErrClaimed
}

// Record implements turn.Recorder: a read-only call's outcome, stored
// with one create-only write once the call ran, and no claim before.
func (s *Store) Record(ctx context.Context, ref turn.JournalRef, o *turn.Outcome) (*turn.Outcome, error) {
	return s.record(ctx, ref, o, nuid.Next())
}

func (s *Store) record(ctx context.Context, ref turn.JournalRef, o *turn.Outcome, id string) (*turn.Outcome, error) {
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	data, err := (&callRecord{State: "done", Worker: s.Worker, Claim: id, Outcome: o, Digest: ref.Digest}).encode()
	if err != nil {
		return nil, err
	}
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	for attempt := 1; ; attempt++ {
		e, err := s.create(ctx, key, data)
		if err != nil || e == nil {
			return nil, err
		}
		rec, err := readRecord(key, e)
		if err != nil {
			return nil, err
		}
		switch {
		case rec.reused(ref):
			return nil, turn.ErrReused
		case rec.Claim == id:
			return nil, nil // this very write, its acknowledgement lost
		case rec.State == "done" && rec.Outcome != nil:
			return rec.Outcome, nil
		}
		// Claimed by an attempt that has stored no outcome (a worker that
		// claims read-only calls, or one that died running it): this
		// outcome is stored over the claim, unless the key changes first.
		if _, err := kv.Update(ctx, key, data, e.Revision()); err == nil {
			return nil, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt == claimAttempts {
			return nil, err
		}
	}
}

// create writes value to key unless the key exists. It returns nil when
// this write created the key, and otherwise the key's entry.
func (s *Store) create(ctx context.Context, key string, value []byte) (jetstream.KeyValueEntry, error) {
	// The first attempt of a step finds no key (the common case): a write
	// that expects the key's last sequence to be 0 creates it. Anything
	// else goes to KV.Create, which also creates a key that was deleted.
	m := s.msg(key, value)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	if s.Pub.PublishMsg(ctx, m) == nil {
		return nil, nil
	}
	kv := s.Pub.Retry().KV(s.Pub.JS, s.KV)
	for attempt := 1; ; attempt++ {
		_, err := kv.Create(ctx, key, value)
		if err == nil {
			return nil, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
		e, err := kv.Get(ctx, key)
		if err == nil {
			return e, nil
		}
		// The server has just said the key exists, and a read misses it:
		// the read was answered by a replica that is behind (reads are
		// direct gets, which any replica answers), around a leader change.
		// Create again: the key is found, or it is created now.
		if !errors.Is(err, jetstream.ErrKeyNotFound) || attempt == claimAttempts {
			return nil, err
		}
		if err := pause.For(ctx, time.Duration(attempt)*25*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// readRecord decodes a call key's entry.
func readRecord(key string, e jetstream.KeyValueEntry) (*callRecord, error) {
	var rec callRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, fmt.Errorf("call record %s is unreadable: %w", key, err)
	}
	return &rec, nil
}

// Store implements turn.Journal.
func (s *Store) Store(ctx context.Context, ref turn.JournalRef, o *turn.Outcome) error {
	key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
	data, err := (&callRecord{State: "done", Worker: s.Worker, Outcome: o, Digest: ref.Digest}).encode()
	if err != nil {
		return err
	}
	return s.Pub.PublishMsg(ctx, s.msg(key, data))
}

// msg is a write of a call key, as KV.Put makes it for a bucket of this
// server's own JetStream domain (the bucket the worker creates; not a
// mirror, nor a bucket reached through another domain's API prefix).
// Call keys are made by protocol.CallKey from validated ids, so they are
// valid keys.
func (s *Store) msg(key string, value []byte) *nats.Msg {
	m := nats.NewMsg("$KV." + s.KV.Bucket() + "." + key)
	m.Data = value
	return m
}

type cancelMark struct {
	Reason string `json:"reason"`
}

// MarkCancelled records that the turn was cancelled: at once in this
// worker's mirror, then in the bucket for every other worker and for
// steps that come later.
func (s *Store) MarkCancelled(ctx context.Context, agentID, turnID, reason string) error {
	s.Remember(agentID, turnID, reason)
	data, _ := json.Marshal(cancelMark{Reason: reason})
	_, err := s.Pub.Retry().KV(s.Pub.JS, s.KV).Put(ctx, protocol.TurnKey(agentID, turnID, "cancel"), data)
	return err
}

// Remember records the turn's cancel in this worker's mirror only, at
// once: steps that start here read it without a round trip. The cancel
// subscription calls it before it aborts running steps, and has the mark
// written to the bucket after (CancelWriter).
func (s *Store) Remember(agentID, turnID, reason string) {
	s.remember(agentID+"."+turnID, reason)
}

func (s *Store) remember(turn, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancelled == nil {
		s.cancelled = map[string]string{}
	}
	s.cancelled[turn] = reason
}

// WatchCancels mirrors the bucket's cancel marks in memory until ctx
// ends. Until the existing marks are loaded, Cancelled reads the bucket.
// Marks leave the mirror with the bucket's TTL, as they leave the bucket.
func (s *Store) WatchCancels(ctx context.Context, ttl time.Duration) error {
	w, err := s.KV.Watch(ctx, "turn.*.*.cancel", jetstream.IgnoreDeletes())
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return fmt.Errorf("watching cancel marks: %w", err)
	}
	defer func() { _ = w.Stop() }()
	seen := map[string]time.Time{}
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune.C:
			s.mu.Lock()
			for k, at := range seen {
				if time.Since(at) > ttl {
					delete(seen, k)
					delete(s.cancelled, k)
				}
			}
			s.mu.Unlock()
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil { // every existing mark is loaded
				s.mu.Lock()
				s.watching = true
				s.mu.Unlock()
				continue
			}
			t := strings.Split(e.Key(), ".")
			if len(t) != 4 {
				continue
			}
			var m cancelMark
			_ = json.Unmarshal(e.Value(), &m)
			s.remember(t[1]+"."+t[2], m.Reason)
			seen[t[1]+"."+t[2]] = e.Created()
		}
	}
}

// Cancelled implements turn.State.
func (s *Store) Cancelled(ctx context.Context, agentID, turnID string) (bool, string, error) {
	s.mu.RLock()
	reason, ok := s.cancelled[agentID+"."+turnID]
	watching := s.watching
	s.mu.RUnlock()
	if ok || watching {
		return ok, reason, nil
	}
	return s.readCancelMark(ctx, agentID, turnID)
}

// readCancelMark reads the turn's cancel mark from the bucket, not the
// mirror, which a watch fills a little after another worker wrote it.
func (s *Store) readCancelMark(ctx context.Context, agentID, turnID string) (bool, string, error) {
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
func (s *Store) Loaded(ctx context.Context, agentID, turnID string) (map[string]bool, error) {
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

func (s *Store) loaded(ctx context.Context, agentID, turnID string) ([]string, uint64, error) {
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
func (s *Store) AddLoaded(ctx context.Context, agentID, turnID string, add []string) error {
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
