package turnstate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// StepCancelFunc is told of a turn.cancel.step message, on the
// subscription's one goroutine: it must not wait on the network.
type StepCancelFunc func(agentID, turnID string, step int64, reason string)

// SubscribeStepCancels delivers every turn.cancel.step.<agent_id>.<turn_id>
// message to fn on this worker (no queue group: the step runs on one
// worker, which only it knows). A step cancel leaves no mark: it aborts
// what runs now, and nothing else of the turn.
func SubscribeStepCancels(nc *nats.Conn, fn StepCancelFunc) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(protocol.PrefixCancelStep+".*.*", func(m *nats.Msg) {
		agentID, turnID, c, ok := ParseStepCancel(m.Subject, m.Data)
		if ok {
			fn(agentID, turnID, c.Step, textclip.Reason(c.Reason))
		}
	})
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("lifting the step cancel subscription's pending limits: %w", err)
	}
	return sub, nil
}

// ParseStepCancel reads a turn.cancel.step message; ok is false for
// anything malformed, which is dropped.
func ParseStepCancel(subject string, data []byte) (agentID, turnID string, c protocol.CancelStep, ok bool) {
	rest, found := strings.CutPrefix(subject, protocol.PrefixCancelStep+".")
	if !found {
		return "", "", c, false
	}
	agentID, turnID, found = strings.Cut(rest, ".")
	if !found || !protocol.ValidID(agentID) || !protocol.ValidID(turnID) {
		return "", "", c, false
	}
	if len(data) > 64<<10 || json.Unmarshal(data, &c) != nil || c.Step < 0 {
		return "", "", c, false
	}
	return agentID, turnID, c, true
}
