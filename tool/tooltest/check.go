package tooltest

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// Outcome is how a checked call ended, as the worker would report it.
type Outcome struct {
	// Output is the text the model reads: the Result's Content, or
	// "Error (<kind>): <message>" followed by the Content.
	Output string
	// Err is the error the call ended with; nil when it succeeded.
	Err *tool.Error
	// Item is the output item the worker publishes and the gateway appends
	// to the conversation (a function_call_output), byte for byte.
	Item json.RawMessage
	// Repairs names the repair-ladder rungs that made the arguments parse
	// ("trailing_commas", …), on a refusal too.
	Repairs []string
	// Activity is the call's progress label ([tool.Def].Activity, or
	// CompletedActivity once it ended).
	Activity string
	// Details and Events are the Result's, for user interfaces.
	Details any
	Events  []protocol.PresentationEvent
	// EndTurn and CompleteActorEvent are the Result's.
	EndTurn            bool
	CompleteActorEvent bool
}

// Checker runs calls of a tool as a worker runs them, without NATS: the
// arguments go up the repair ladder and are validated against the full
// schema, the call runs with its time limit and the call's identity in its
// context, a panic or an error becomes an error output, a tool that
// ignores its context past the limit is left behind, and the outcome is
// clipped to what one event holds. The zero value has a worker's defaults.
type Checker struct {
	// Timeout is the limit of a call whose Spec sets none; zero is the
	// worker's default --call-timeout (2m).
	Timeout time.Duration
	// Call is the identity CallFrom returns inside the tool; empty fields
	// are "agent-test", "turn-test", step 1 and "call_test".
	Call tool.Call
	// Progress, when set, receives the call's ReportProgress reports.
	Progress func(done, total int64, label string)
}

// Check runs one call of t with the model's argument string (JSON, or what
// the model sent instead) as a worker with default settings would. See
// [Checker].
func Check(ctx context.Context, t *tool.Tool, arguments string) Outcome {
	return Checker{}.Check(ctx, t, arguments)
}

// maxPayload is a NATS server's default max_payload: the worker clips an
// outcome to the event budget of its connection's.
const maxPayload = 1 << 20

// Check runs one call of t with the model's argument string. Cancelling
// ctx is the turn's cancel: the call ends with kind aborted. A nil t, or
// one New did not make, is an outcome of kind internal, not a panic.
func (c Checker) Check(ctx context.Context, t *tool.Tool, arguments string) Outcome {
	id := c.Call
	id.AgentID = or(id.AgentID, "agent-test")
	id.TurnID = or(id.TurnID, "turn-test")
	id.CallID = or(id.CallID, "call_test")
	if id.Step == 0 {
		id.Step = 1
	}
	if t == nil || t.Definition() == nil {
		// A nil or zero Tool (not made by New): the worker refuses it
		// too, as a failed request.
		err := tool.Errorf(tool.Internal, "the tool is nil or was not made by tool.New")
		return Outcome{Output: "Error (" + string(err.Kind) + "): " + err.Message, Err: err}
	}
	sp := t.Spec()
	set, err := turn.NewSet(t)
	if err != nil { // one tool has no duplicate
		panic(err)
	}
	in := turn.Input{AgentID: id.AgentID, TurnID: id.TurnID, Step: int64(id.Step),
		Calls: []protocol.CallItem{{Type: protocol.ItemFunctionCall, CallID: id.CallID, Name: sp.Name, Namespace: sp.Namespace, Arguments: arguments}},
		// A deferred tool is checked as once loaded: loading it is the
		// gateway's and tool search's part.
		Loaded: map[string]bool{turn.ToolKey(sp.Namespace, sp.Name): true},
	}
	if c.Progress != nil {
		ctx = tools.WithProgress(ctx, c.Progress)
	}
	d := turn.Dispatcher{Timeout: c.Timeout, MaxEventBytes: protocol.EventBudget(maxPayload)}
	o := d.Run(ctx, set, in).Outcomes[0]
	return Outcome{
		Output: outputText(o.Item), Err: o.Err, Item: o.Item, Repairs: o.Repairs(), Activity: o.Activity,
		Details: o.Details, Events: o.Events(), EndTurn: o.EndTurn, CompleteActorEvent: o.Complete,
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// outputText is the text of an output item: its output string, or the
// text of its parts when it holds media.
func outputText(item json.RawMessage) string {
	var fo struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(item, &fo) != nil {
		return ""
	}
	var s string
	if json.Unmarshal(fo.Output, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(fo.Output, &parts)
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
