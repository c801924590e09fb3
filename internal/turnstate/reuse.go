package turnstate

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// reuseCheckTimeout bounds one ReusedIDs.
const reuseCheckTimeout = 10 * time.Second

// ReusedIDs implements turn.ReuseChecker: of refs (calls of one step
// that were answered without a claim, because they failed before
// running), the call ids whose keys hold the claim of another call. It
// lists the step's call keys once, so a first version of a step (no
// keys) costs one request whatever the number of calls, and reads only
// the keys that are there.
func (s *Store) ReusedIDs(ctx context.Context, refs []turn.JournalRef) (map[string]bool, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	// The listing ends with the watcher's marker of its initial values,
	// which never comes when the consumer's pending count could not be
	// read: bounded, as a context without a deadline would wait for ever
	// (the step's, and a cancelled turn's, which turn.Dispatcher detaches).
	ctx, cancel := context.WithTimeout(ctx, reuseCheckTimeout)
	defer cancel()
	r := refs[0]
	lister, err := s.KV.ListKeysFiltered(ctx, "call."+r.AgentID+"."+r.TurnID+"."+strconv.FormatInt(r.Step, 10)+".*")
	if err != nil {
		return nil, err
	}
	present := map[string]bool{}
	for k := range lister.Keys() {
		present[k] = true
	}
	_ = lister.Stop() // the lister stops its watcher itself once listed
	if err := ctx.Err(); err != nil {
		return nil, err // the list may be cut short
	}
	var reused map[string]bool
	for _, ref := range refs {
		key := protocol.CallKey(ref.AgentID, ref.TurnID, ref.Step, ref.CallID)
		if !present[key] {
			continue
		}
		e, err := s.KV.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		var rec callRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.reused(ref) {
			if reused == nil {
				reused = map[string]bool{}
			}
			reused[ref.CallID] = true
		}
	}
	return reused, nil
}
