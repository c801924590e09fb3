package bus

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// CancelFunc is told of a turn.cancel message. It runs on the
// subscription's one goroutine, so it must not wait on the network:
// every other cancel waits behind it.
type CancelFunc func(agentID, turnID, reason string)

// SubscribeCancels delivers every turn.cancel.<agent_id>.<turn_id>
// message to fn on this worker (no queue group: every worker must abort
// its own running calls of the turn). The reason is clipped here, before
// anything keeps it. The subscription has no pending limits: a cancel
// is never dropped as a slow consumer's (fn is O(1), so the backlog is
// only the messages of a burst, each reason at most
// protocol.MaxReasonBytes once decoded).
func SubscribeCancels(nc *nats.Conn, fn CancelFunc) (*nats.Subscription, error) {
	sub, err := nc.Subscribe(protocol.PrefixCancel+".*.*", func(m *nats.Msg) {
		t := strings.Split(m.Subject, ".")
		if len(t) != 4 || !protocol.ValidID(t[2]) || !protocol.ValidID(t[3]) {
			return
		}
		var c protocol.Cancel
		_ = json.Unmarshal(m.Data, &c) // the body is optional
		// The reason is stored and quoted into the output of every call
		// the cancel reaches: it is bounded here, once.
		fn(t[2], t[3], textclip.Reason(c.Reason))
	})
	if err != nil {
		return nil, err
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		_ = sub.Unsubscribe()
		return nil, fmt.Errorf("lifting the cancel subscription's pending limits: %w", err)
	}
	return sub, nil
}
