package bus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
// textclip.MaxReasonBytes once decoded).
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

// DefaultCancelWriters is how many cancels' marks and notes a worker
// writes at once.
const DefaultCancelWriters = 16

// CancelWriter writes, off the cancel subscription, what a cancel leaves
// in the fleet's state: the turn's cancel mark in TURN_STATE (for steps
// that come later, on any worker) and, when the turn has pending-step
// records, its cancel note on TURN_APPROVALS (so that one worker
// finishes its steps held for approval). Cancels of one turn that are
// still queued are written once, with the last reason; turns with a step
// running on this worker are written first. The queue is not bounded: it
// holds one entry per turn, and a cancel is never dropped.
type CancelWriter struct {
	State *TurnState
	// Writers is how many are written at once (DefaultCancelWriters).
	Writers int
	Log     *slog.Logger
	// Backlog, when set, is how many cancels the subscription holds
	// unread (Subscription.Pending). While it is over cancelBacklog the
	// writers hold off, up to a second at a time: reading the cancels
	// (and aborting the calls they reach) comes before writing them, on
	// a machine whose cores the writes would take.
	Backlog func() int

	mu     sync.Mutex
	queued map[string]*cancelJob // by "<agent>.<turn>"
	urgent []*cancelJob
	normal []*cancelJob
	kick   chan struct{}
	once   sync.Once
}

type cancelJob struct {
	agentID, turnID, reason string
	urgent                  bool
}

func (w *CancelWriter) init() {
	w.once.Do(func() {
		w.queued = map[string]*cancelJob{}
		w.kick = make(chan struct{}, 1)
	})
}

// Add queues the turn's cancel; urgent puts it ahead of the others (a
// step of the turn runs here). It never blocks on the network.
func (w *CancelWriter) Add(agentID, turnID, reason string, urgent bool) {
	w.init()
	k := agentID + "." + turnID
	w.mu.Lock()
	j := w.queued[k]
	switch {
	case j == nil:
		j = &cancelJob{agentID: agentID, turnID: turnID, reason: reason, urgent: urgent}
		w.queued[k] = j
		if urgent {
			w.urgent = append(w.urgent, j)
		} else {
			w.normal = append(w.normal, j)
		}
	default:
		j.reason = reason
		if urgent && !j.urgent {
			// Moved ahead: the entry in the normal queue is skipped.
			j = &cancelJob{agentID: agentID, turnID: turnID, reason: reason, urgent: true}
			w.queued[k] = j
			w.urgent = append(w.urgent, j)
		}
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// next takes the first queued cancel, nil when none is.
func (w *CancelWriter) next() *cancelJob {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		var j *cancelJob
		switch {
		case len(w.urgent) > 0:
			j, w.urgent = w.urgent[0], w.urgent[1:]
		case len(w.normal) > 0:
			j, w.normal = w.normal[0], w.normal[1:]
		default:
			return nil
		}
		if k := j.agentID + "." + j.turnID; w.queued[k] == j {
			delete(w.queued, k)
			if len(w.urgent)+len(w.normal) > 0 {
				// Another writer takes the next one.
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
			return j
		}
	}
}

// Len is how many cancels are waiting to be written.
func (w *CancelWriter) Len() int {
	w.init()
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queued)
}

// drainTime bounds the writing of the queued cancels at a stop.
const drainTime = 5 * time.Second

// Run writes queued cancels until ctx ends, then for up to drainTime
// the ones still queued.
func (w *CancelWriter) Run(ctx context.Context) error {
	w.init()
	n := w.Writers
	if n <= 0 {
		n = DefaultCancelWriters
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				w.yield(ctx)
				if j := w.next(); j != nil {
					// A write under way finishes at a stop.
					w.write(context.WithoutCancel(ctx), j)
					continue
				}
				select {
				case <-w.kick:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainTime)
	defer cancel()
	for j := w.next(); j != nil && drain.Err() == nil; j = w.next() {
		w.write(drain, j)
	}
	if left := w.Len(); left > 0 {
		w.log().Warn("stopped with turn cancels unwritten; other workers write them, or later steps of those turns run", "cancels", left)
	}
	return nil
}

// cancelBacklog is the unread cancels above which the writers hold off.
const cancelBacklog = 64

// yield waits while the subscription's backlog is over cancelBacklog,
// for up to a second.
func (w *CancelWriter) yield(ctx context.Context) {
	if w.Backlog == nil {
		return
	}
	for end := time.Now().Add(time.Second); w.Backlog() > cancelBacklog && time.Now().Before(end); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (w *CancelWriter) log() *slog.Logger {
	if w.Log == nil {
		return slog.Default()
	}
	return w.Log
}

// write stores the mark and, if the turn has pending steps, the note.
// The mark comes first: a step held after the pending-step check reads
// it when it is announced (TurnState.Announce).
func (w *CancelWriter) write(ctx context.Context, j *cancelJob) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.State.MarkCancelled(ctx, j.agentID, j.turnID, j.reason); err != nil {
		w.log().Error("recording a turn's cancel failed", "agent_id", j.agentID, "turn_id", j.turnID, "err", err)
	}
	pending, err := w.State.HasPending(ctx, j.agentID, j.turnID)
	if err != nil {
		w.log().Warn("checking a cancelled turn for pending steps failed; noting the cancel anyway", "agent_id", j.agentID, "turn_id", j.turnID, "err", err)
	}
	if err == nil && !pending {
		return
	}
	// Steps of the turn that wait for approval run nowhere: the note has
	// one worker finish them.
	if err := w.State.NoteCancel(ctx, j.agentID, j.turnID, j.reason); err != nil {
		w.log().Error("noting a turn's cancel for its pending steps failed; they end at their answer or timeout", "agent_id", j.agentID, "turn_id", j.turnID, "err", err)
	}
}

// HasPending reports whether the turn has a pending-step record, in any
// state (decided, or deleted: its last message over every step of the
// turn may be a delete of one while another still waits, so any message
// counts). It asks the stream's leader, not a replica that may be
// behind.
func (s *TurnState) HasPending(ctx context.Context, agentID, turnID string) (bool, error) {
	req, _ := json.Marshal(struct {
		LastFor string `json:"last_by_subj"`
	}{"$KV." + s.KV.Bucket() + ".approval." + agentID + "." + turnID + ".*"})
	m, err := s.Pub.JS.Conn().RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET.KV_"+s.KV.Bucket(), req)
	if err != nil {
		return false, err
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return false, fmt.Errorf("%w: %v", jetstream.ErrInvalidJSAck, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return false, nil
		}
		return false, resp.Error
	}
	return true, nil
}
