package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

// Agent drives turns: it asks the workers for a turn's tools, calls the
// model, publishes each model response as a step, and gives the model
// the step's outputs, until a step ends the turn.
type Agent struct {
	GW    *gateway.Client
	Model openai.Client
	// ModelName is the model the requests name.
	ModelName string
	// Instructions is the system message of every turn; optional.
	Instructions string
	// Store lets the provider keep the responses; off, the conversation
	// is only the gateway's.
	Store bool
	// MaxSteps bounds the model responses of one turn.
	MaxSteps int
	// TaskBindings are the bindings of task turns (web, brain).
	TaskBindings map[string]bool
	// TaskFairness is the fairness of task turns (the zero value: each
	// agent its own share).
	TaskFairness protocol.Fairness
	// Approve, when set, decides each call of a step that waits for a
	// person's approval (the Decision's CallID is filled in).
	Approve func(ctx context.Context, call protocol.PendingCall) protocol.Decision
	// OnEvent, when set, sees every event of every step (for display),
	// on the goroutine of the event's turn: task turns run at once.
	OnEvent func(turnID string, ev protocol.Event)
	Log     *slog.Logger

	tasks sync.WaitGroup
}

// Turn is one turn to drive: its ids, its context and its first user
// message.
type Turn struct {
	AgentID, TurnID string
	Context         protocol.Context
	Message         string
}

// Result is how a turn ended.
type Result struct {
	// Text is the model's last message text.
	Text string
	// Steps is how many steps were published.
	Steps int
	// Cancelled is set when the turn was cancelled (its ctx ended).
	Cancelled bool
	// Verdict is the last step's verdict in a task turn.
	Verdict *protocol.Verdict
}

// ErrMaxSteps is returned for a turn that reached MaxSteps.
var ErrMaxSteps = errors.New("the turn reached its step limit")

// RunTurn drives a turn to its end. When ctx ends mid-turn the turn is
// cancelled on the workers, and RunTurn waits (a bounded time) for the
// step's step.done, whose items say what was aborted, and returns with
// Cancelled set.
func (a *Agent) RunTurn(ctx context.Context, t Turn) (*Result, error) {
	cat, err := a.GW.Catalog(ctx, t.AgentID, t.TurnID, t.Context)
	if err != nil {
		return nil, err
	}
	for _, n := range cat.Notes {
		a.Log.Warn("catalog note", "turn_id", t.TurnID, "note", n)
	}
	defs, err := cat.Definitions()
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	// The tools are the worker's bytes: re-encoded by the SDK, their
	// parameters' keys would be sorted, and the request would differ
	// from the digest the prompt cache was keyed on.
	tools := make([]responses.ToolUnionParam, len(defs))
	for i, d := range defs {
		tools[i] = param.Override[responses.ToolUnionParam](d)
	}
	input := []json.RawMessage{userMessage(t.Message)}
	res := &Result{}
	for n := int64(0); ; n++ {
		if a.MaxSteps > 0 && n >= int64(a.MaxSteps) {
			return res, ErrMaxSteps
		}
		resp, err := a.respond(ctx, tools, input)
		if err != nil {
			if ctx.Err() != nil {
				res.Cancelled = true
				return res, a.cancel(t.AgentID, t.TurnID, "the gateway stopped the turn")
			}
			return res, err
		}
		output := make([]json.RawMessage, len(resp.Output))
		for i, item := range resp.Output {
			output[i] = json.RawMessage(item.RawJSON())
		}
		if txt := resp.OutputText(); txt != "" {
			res.Text = txt
		}
		done, cancelled, err := a.step(ctx, protocol.Step{AgentID: t.AgentID, TurnID: t.TurnID, Step: n, Context: t.Context, Output: output})
		if err != nil {
			return res, err
		}
		res.Steps++
		res.Cancelled = cancelled
		res.Verdict = done.Task
		if done.EndTurn || cancelled {
			return res, nil
		}
		input = append(input, output...)
		input = append(input, done.Items...)
		if v := done.Task; v != nil && v.Status == protocol.VerdictRepair {
			// The one repair instruction of a task turn that answered in
			// prose: the worker wrote it; the gateway only sends it.
			input = append(input, userMessage(v.Instruction))
		}
	}
}

// respond calls the model with the conversation so far. Every item is
// passed as the bytes it came as (the model's own output items, the
// workers' output items), never re-encoded.
func (a *Agent) respond(ctx context.Context, tools []responses.ToolUnionParam, input []json.RawMessage) (*responses.Response, error) {
	items := make(responses.ResponseInputParam, len(input))
	for i, it := range input {
		items[i] = param.Override[responses.ResponseInputItemUnionParam](it)
	}
	p := responses.ResponseNewParams{
		Model: a.ModelName,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
		Tools: tools,
		Store: param.NewOpt(a.Store),
	}
	if !a.Store {
		// Nothing is kept by the provider, so reasoning items come back
		// encrypted, to be passed on with the rest of the conversation.
		p.Include = []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent}
	}
	if a.Instructions != "" {
		p.Instructions = param.NewOpt(a.Instructions)
	}
	resp, err := a.Model.Responses.New(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	return resp, nil
}

// step publishes one step and waits for its step.done. If ctx ends
// first, the turn is cancelled and the step.done that follows the cancel
// is still read.
func (a *Agent) step(ctx context.Context, s protocol.Step) (*protocol.StepDone, bool, error) {
	run, err := a.GW.Send(ctx, s, gateway.WithActivity())
	if err != nil {
		if ctx.Err() != nil {
			// Stopped while publishing: the step may be stored all the
			// same, and the cancel mark makes it run nothing.
			return &protocol.StepDone{AgentID: s.AgentID, TurnID: s.TurnID, Step: s.Step, EndTurn: true}, true,
				a.cancel(s.AgentID, s.TurnID, "the gateway stopped the turn")
		}
		return nil, false, err
	}
	defer run.Close()
	readCtx := ctx
	cancelled := false
	for {
		ev, err := run.Next(readCtx)
		var bad *gateway.EventError
		var dead *gateway.DeadLetterError
		switch {
		case errors.As(err, &bad):
			a.Log.Warn("skipping a malformed event", "err", err)
			continue
		case errors.As(err, &dead) && !dead.Step:
			// Every pending call was answered, so the workers refused the
			// answer for another reason (the step is no longer held);
			// the step goes on to its end or its expiry.
			a.Log.Warn("an answer to a pending step was dead-lettered", "turn_id", s.TurnID, "step", s.Step, "reason", dead.Reason)
			continue
		case err != nil && ctx.Err() != nil && !cancelled:
			// Cancel once, then read on for the step's own end.
			cancelled = true
			if err := a.cancel(s.AgentID, s.TurnID, "the gateway stopped the turn"); err != nil {
				return nil, true, err
			}
			var stop context.CancelFunc
			readCtx, stop = context.WithTimeout(context.Background(), cancelWait)
			defer stop()
			continue
		case err != nil:
			return nil, cancelled, err
		}
		if a.OnEvent != nil {
			a.OnEvent(s.TurnID, ev)
		}
		switch ev := ev.(type) {
		case *protocol.StepDone:
			return ev, cancelled, nil
		case *protocol.StepPending:
			// Stopped while deciding: the next Next sees ctx's end and
			// cancels the turn, which answers the held calls aborted.
			if err := a.decide(ctx, ev); err != nil && ctx.Err() == nil {
				return nil, cancelled, err
			}
		}
	}
}

// decide answers a step whose calls wait for approval. Without an
// Approve the step waits for an answer from elsewhere (a user interface
// that reads the same events), or for its expiry.
func (a *Agent) decide(ctx context.Context, p *protocol.StepPending) error {
	if a.Approve == nil {
		a.Log.Warn("a step waits for approval", "turn_id", p.TurnID, "step", p.Step, "calls", len(p.Approvals), "expires_at", p.ExpiresAt)
		return nil
	}
	ds := make([]protocol.Decision, len(p.Approvals))
	for i, call := range p.Approvals {
		ds[i] = a.Approve(ctx, call)
		ds[i].CallID = call.CallID // every pending call gets its own decision
	}
	return a.GW.Decide(ctx, p.AgentID, p.TurnID, p.Step, 1, ds)
}

// cancelWait bounds the wait for a cancelled step's step.done.
const cancelWait = 30 * time.Second

// cancel cancels a turn on the workers, on a context of its own: the
// turn's has ended.
func (a *Agent) cancel(agentID, turnID, reason string) error {
	ctx, stop := context.WithTimeout(context.Background(), cancelWait)
	defer stop()
	return a.GW.Cancel(ctx, agentID, turnID, reason)
}

// ServeTasks drives a task turn for every task.ready event until ctx
// ends; each runs in its own goroutine. WaitTasks waits for them.
func (a *Agent) ServeTasks(ctx context.Context, durable string) error {
	return a.GW.WorkflowEvents(ctx, durable, func(_ context.Context, ev *protocol.WorkflowEvent) error {
		if ev.Type != protocol.EventTaskReady {
			return nil
		}
		a.tasks.Add(1)
		go func() {
			defer a.tasks.Done()
			// The task turn is not the handler's: it outlives the
			// delivery (which is acknowledged at once) and ends with the
			// serving context.
			res, err := a.RunTurn(ctx, Turn{AgentID: ev.AgentID, TurnID: ev.TurnID, Context: a.taskContext(ev), Message: ev.Instructions})
			switch {
			case err != nil:
				a.Log.Error("task turn failed", "workflow_id", ev.WorkflowID, "task_id", ev.TaskID, "err", err)
			case res.Verdict != nil:
				a.Log.Info("task turn ended", "workflow_id", ev.WorkflowID, "task_id", ev.TaskID, "status", res.Verdict.Status, "reason", res.Verdict.Reason)
			}
		}()
		return nil
	})
}

// WaitTasks waits for the turns started by ServeTasks and by schedule
// fires.
func (a *Agent) WaitTasks() { a.tasks.Wait() }

// userMessage is a Responses API user message item.
func userMessage(text string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}})
	return b
}

// taskContext is the context of the task turn ev starts.
func (a *Agent) taskContext(ev *protocol.WorkflowEvent) protocol.Context {
	tc := ev.TaskContext(a.TaskBindings)
	tc.Fairness = a.TaskFairness
	return tc
}
