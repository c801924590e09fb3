package mcpdoor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// StepBucket is the key-value bucket of named turns' step counters:
// key "step.<agent_id>.<turn_id>", value the last step number given.
const StepBucket = "MCP_DOOR"

// stepTTL is how long a named turn's counter outlives its last call.
const stepTTL = 24 * time.Hour

func (d *Door) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	d.kvMu.Lock()
	defer d.kvMu.Unlock()
	if d.kv != nil {
		return d.kv, nil
	}
	kv, err := d.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: StepBucket, TTL: stepTTL, History: 1,
		Description: "MCP door: the last step number of each named turn"})
	if err != nil {
		return nil, fmt.Errorf("the step counter bucket %s: %w", StepBucket, err)
	}
	d.kv = kv
	return kv, nil
}

// nextStep gives a named turn its next step number from JetStream, by
// compare-and-set, so that replicas never give one number twice.
func (d *Door) nextStep(ctx context.Context, agentID, turnID string) (int64, error) {
	kv, err := d.bucket(ctx)
	if err != nil {
		return 0, err
	}
	key := "step." + agentID + "." + turnID
	for range 100 {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := kv.Create(ctx, key, []byte("0")); err == nil {
				return 0, nil
			} else if !errors.Is(err, jetstream.ErrKeyExists) {
				return 0, fmt.Errorf("step counter: %w", err)
			}
			continue
		} else if err != nil {
			return 0, fmt.Errorf("step counter: %w", err)
		}
		n, err := strconv.ParseInt(string(e.Value()), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("step counter %s holds %q", key, e.Value())
		}
		if _, err := kv.Update(ctx, key, []byte(strconv.FormatInt(n+1, 10)), e.Revision()); err == nil {
			return n + 1, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			// A conflict is ErrKeyExists ("wrong last sequence"); anything
			// else is an error of the bus.
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
				return 0, fmt.Errorf("step counter: %w", err)
			}
		}
	}
	return 0, errors.New("step counter: too many concurrent calls on one turn")
}
