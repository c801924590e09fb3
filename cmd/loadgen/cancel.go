package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/turnstate"
	"github.com/agentbull/toolruntime/protocol"
)

// cancelOptions are the cancel modes' flags.
type cancelOptions struct {
	// storm, when set, is the cancels of other turns published between
	// one user's running call and that user's cancel of it.
	storm int
	// pending, when set, is the turns whose steps wait for approval and
	// are then cancelled at once, each with a reason of reasonBytes.
	pending     int
	reasonBytes int
}

// event is what the cancel modes read of an event on turn.call.output.
type event struct {
	Type   string `json:"type"`
	TurnID string `json:"turn_id"`
	Error  *struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	} `json:"error"`
}

// stepBody is a step of one call of the diagnostics tools; extra adds
// to its context (context.approval, context.fairness).
func stepBody(agent, turnID, call, args string, extra map[string]any) []byte {
	c := map[string]any{"kind": "text", "bindings": map[string]any{diagnostics.Binding: true}}
	maps.Copy(c, extra)
	data, _ := json.Marshal(map[string]any{
		"agent_id": agent, "turn_id": turnID, "step": 0, "context": c,
		"output": []any{map[string]any{"type": "function_call", "call_id": "c0", "name": call, "arguments": args}},
	})
	return data
}

// stepMsg is the message of step 0 of agent's turnID, as a gateway
// publishes it (its message id makes a second publish a duplicate).
func stepMsg(agent, turnID string, data []byte) *nats.Msg {
	m := nats.NewMsg(protocol.Subject(protocol.PrefixCall, agent, turnID))
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, protocol.StepMsgID(agent, turnID, 0))
	return m
}

// publishStep publishes a step to its stream and waits for the stream to
// store it.
func publishStep(ctx context.Context, js jetstream.JetStream, agent, turnID string, data []byte) error {
	_, err := js.PublishMsg(ctx, stepMsg(agent, turnID, data))
	return err
}

// cancelStorm starts a long sleep call for one user's turn, publishes
// o.storm cancels of other turns on a connection of their own (flushed:
// the server has them all before the next publish), then the user's
// cancel, and reports how long the call took from that cancel to its
// aborted call.output, and until the storm's last cancel mark was in
// TURN_STATE.
func cancelStorm(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, o options) error {
	run := fmt.Sprintf("c%d", time.Now().UnixNano()%1e9)
	const user = "user"
	turnID := run + "-real"
	outs := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(protocol.Subject(protocol.PrefixOutput, user, turnID), outs)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	started := make(chan *nats.Msg, 1)
	act, err := nc.Subscribe(protocol.Subject(protocol.PrefixActive, user, turnID), func(m *nats.Msg) {
		select {
		case started <- m:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer act.Unsubscribe()
	if err := publishStep(ctx, js, user, turnID, stepBody(user, turnID, "sleep", `{"ms":110000}`, nil)); err != nil {
		return err
	}
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		return errors.New("the user's sleep call did not start within 30 s")
	case <-ctx.Done():
		return ctx.Err()
	}
	_ = act.Unsubscribe()

	sc, err := nats.Connect(nc.ConnectedUrl(), nats.Name("loadgen-cancels"))
	if err != nil {
		return err
	}
	defer sc.Close()
	body := []byte(`{"reason":"the workflow was stopped"}`)
	stormAgent := func(i int) string { return fmt.Sprintf("storm%d", i%500) }
	begin := time.Now()
	for i := range o.cancelOpts.storm {
		if err := sc.Publish(protocol.Subject(protocol.PrefixCancel, stormAgent(i), fmt.Sprintf("%s-%d", run, i)), body); err != nil {
			return err
		}
	}
	if err := sc.Flush(); err != nil {
		return err
	}
	stormTook := time.Since(begin)
	sent := time.Now()
	if err := nc.Publish(protocol.Subject(protocol.PrefixCancel, user, turnID), []byte(`{"reason":"user pressed stop"}`)); err != nil {
		return err
	}
	var output, done time.Duration
	for done == 0 {
		select {
		case m := <-outs:
			var ev event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return fmt.Errorf("event %s: %w", m.Data, err)
			}
			switch ev.Type {
			case protocol.EventCallOutput:
				if ev.Error == nil || ev.Error.Kind != "aborted" || !strings.Contains(ev.Error.Message, "user pressed stop") {
					return fmt.Errorf("the user's call ended, not aborted by the cancel: %s", m.Data)
				}
				output = time.Since(sent)
			case protocol.EventStepDone:
				done = time.Since(sent)
			}
		case <-time.After(2 * time.Minute):
			return errors.New("no step.done of the cancelled turn within 2 minutes")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	fmt.Fprintf(o.out, "cancel storm: %d cancels of other turns published in %s, then the user's cancel\n", o.cancelOpts.storm, stormTook.Round(time.Millisecond))
	fmt.Fprintf(o.out, "user's cancel to its aborted call.output: %s (step.done %s)\n", output.Round(100*time.Microsecond), done.Round(100*time.Microsecond))
	// The storm's marks are written off the subscription, after the
	// cancels are read: the last one's is looked for.
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return err
	}
	last := o.cancelOpts.storm - 1
	key := protocol.TurnKey(stormAgent(last), fmt.Sprintf("%s-%d", run, last), "cancel")
	for deadline := time.Now().Add(3 * time.Minute); ; {
		if _, err := kv.Get(ctx, key); err == nil {
			break
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the storm's last cancel mark is not in %s after 3 minutes", protocol.BucketState)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.out, "the storm's last cancel mark stored %s after its first cancel was published\n", time.Since(begin).Round(10*time.Millisecond))
	return nil
}

// cancelPending publishes o.pending steps held for approval
// (context.approval), waits for every step.pending, cancels them all at
// once with reasons of o.reasonBytes (clipped to the server's max
// payload), and checks that every step is decided: one aborted
// call.output and one step.done per turn, and no record left pending.
func cancelPending(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, o options) error {
	run := fmt.Sprintf("p%d", time.Now().UnixNano()%1e9)
	const agent = "pend"
	n := o.cancelOpts.pending
	var (
		mu                      sync.Mutex
		pending, aborted, steps = map[string]bool{}, map[string]bool{}, map[string]bool{}
		bad                     []string
		changed                 = make(chan struct{}, 1)
	)
	sub, err := nc.Subscribe(protocol.PrefixOutput+"."+agent+".*", func(m *nats.Msg) {
		var ev event
		if err := json.Unmarshal(m.Data, &ev); err != nil || !strings.HasPrefix(ev.TurnID, run+"-") {
			return
		}
		mu.Lock()
		switch ev.Type {
		case protocol.EventStepPending:
			pending[ev.TurnID] = true
		case protocol.EventCallOutput:
			if ev.Error != nil && ev.Error.Kind == "aborted" {
				aborted[ev.TurnID] = true
			} else {
				bad = append(bad, string(m.Data))
			}
		case protocol.EventStepDone:
			steps[ev.TurnID] = true
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	count := func(m map[string]bool) func() int {
		return func() int { mu.Lock(); defer mu.Unlock(); return len(m) }
	}
	wait := func(what string, got func() int) error {
		for last, lastChange := -1, time.Now(); got() < n; {
			if c := got(); c != last {
				last, lastChange = c, time.Now()
			} else if time.Since(lastChange) > time.Minute {
				return fmt.Errorf("%d of %d %s, none for a minute", c, n, what)
			}
			select {
			case <-changed:
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
	for i := range n {
		id := fmt.Sprintf("%s-%d", run, i)
		if err := publishStep(ctx, js, agent, id, stepBody(agent, id, "ping", "{}", map[string]any{"approval": []string{"ping"}})); err != nil {
			return err
		}
	}
	if err := wait("steps pending", count(pending)); err != nil {
		return err
	}
	size := min(o.cancelOpts.reasonBytes, int(nc.MaxPayload())-1024)
	body, _ := json.Marshal(protocol.Cancel{Reason: strings.Repeat("r", size)})
	sc, err := nats.Connect(nc.ConnectedUrl(), nats.Name("loadgen-cancels"))
	if err != nil {
		return err
	}
	defer sc.Close()
	begin := time.Now()
	for i := range n {
		if err := sc.Publish(protocol.Subject(protocol.PrefixCancel, agent, fmt.Sprintf("%s-%d", run, i)), body); err != nil {
			return err
		}
	}
	if err := sc.Flush(); err != nil {
		return err
	}
	published := time.Since(begin)
	// The records are read even when steps are missing: they tell a step
	// left pending from an event this program missed.
	waitErr := wait("steps done", count(steps))
	took := time.Since(begin)
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		return err
	}
	undecided := 0
	for i := range n {
		e, err := kv.Get(ctx, turnstate.PendingKey(agent, fmt.Sprintf("%s-%d", run, i), 0))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		var p turn.PendingStep
		if err := json.Unmarshal(e.Value(), &p); err != nil || p.Resolution == nil {
			undecided++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	fmt.Fprintf(o.out, "cancel of pending steps: %d cancels of %d bytes each published at once in %s\n", n, len(body), published.Round(time.Millisecond))
	fmt.Fprintf(o.out, "steps done %d of %d in %s since the first cancel, aborted calls %d, other outputs %d, records still pending %d\n",
		len(steps), n, took.Round(time.Millisecond), len(aborted), len(bad), undecided)
	if waitErr != nil {
		var missing []string
		for i := range n {
			if id := fmt.Sprintf("%s-%d", run, i); !steps[id] && len(missing) < 5 {
				missing = append(missing, id)
			}
		}
		return fmt.Errorf("%w (turns without step.done: %s ...)", waitErr, strings.Join(missing, " "))
	}
	if len(aborted) != n || len(bad) > 0 || undecided > 0 {
		return fmt.Errorf("not every pending step was cancelled (first other output: %s)", strings.Join(bad[:min(1, len(bad))], ""))
	}
	return nil
}
