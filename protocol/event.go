package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// Event types on turn.call.output.<agent_id>.<turn_id>.
const (
	EventCallOutput = "call.output"
	EventStepDone   = "step.done"
)

// Call statuses.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// CallOutput is the event published as soon as one call of a step ends
// (type "call.output").
type CallOutput struct {
	Type      string `json:"type"`
	AgentID   string `json:"agent_id"`
	TurnID    string `json:"turn_id"`
	Step      int64  `json:"step"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Status is StatusOK or StatusError; on error, Error says why.
	Status string     `json:"status"`
	Error  *CallError `json:"error"`
	// Item is the function_call_output (or tool_search_output) item for
	// the model. It is there on errors too: its text says what to fix.
	Item json.RawMessage `json:"item"`
	// Details is structured data for logs and user interfaces, never for
	// the model; Events are the tool's presentation events.
	Details json.RawMessage     `json:"details"`
	Events  []PresentationEvent `json:"events"`
	// Repairs names the repair-ladder rungs that made the arguments
	// parse, in order.
	Repairs    []string `json:"repairs"`
	Activity   string   `json:"activity"`
	DurationMS int64    `json:"duration_ms"`
	// Version, on the worker's side, versions the event's message id
	// (MsgID): the call.output of a call whose id a re-sent step reused.
	// It is not in the JSON.
	Version string `json:"-"`
	// MediaNotes, on the worker's side, holds beside an item whose output
	// is an array the note that replaces each of its parts should it not
	// fit ("" for a text part). It is not in the JSON.
	MediaNotes []string `json:"-"`
}

// CallError is why a call did not succeed.
type CallError struct {
	Kind ErrorKind `json:"kind"`
	// Message is written for the model: what went wrong and what to do.
	Message string `json:"message"`
}

// Error makes a CallError an error: "kind: message".
func (e *CallError) Error() string { return string(e.Kind) + ": " + e.Message }

// ErrorKind classifies a call's error: one of the constants below.
type ErrorKind string

// Error kinds of a [CallError] (docs/protocol.md, "Error kinds").
const (
	UnknownTool      ErrorKind = "unknown_tool"
	NotLoaded        ErrorKind = "not_loaded"
	InvalidArguments ErrorKind = "invalid_arguments"
	ToolError        ErrorKind = "tool_error"
	Timeout          ErrorKind = "timeout"
	Aborted          ErrorKind = "aborted"
	Interrupted      ErrorKind = "interrupted"
	Rejected         ErrorKind = "rejected"
	Internal         ErrorKind = "internal"
)

// PresentationEvent is a tool's event for user interfaces.
type PresentationEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// StepDone is the one event that closes a step (type "step.done").
type StepDone struct {
	Type    string `json:"type"`
	AgentID string `json:"agent_id"`
	TurnID  string `json:"turn_id"`
	Step    int64  `json:"step"`
	// Items holds one output item per call, in the order of the calls:
	// append them to the conversation as they are.
	Items []json.RawMessage `json:"items"`
	// EndTurn is set when a tool ended the turn, the turn was cancelled,
	// or a task turn ended; otherwise call the model again.
	EndTurn bool `json:"end_turn"`
	// CompleteActorEvent is set when a call's tool marked the actor event
	// the turn answers (the message or event that started it) as done;
	// what that means is the gateway's: the workers only pass it on.
	CompleteActorEvent bool `json:"complete_actor_event"`
	// Task is the verdict of a task turn's step; nil in a main turn.
	Task *Verdict `json:"task"`
	// Version, on the worker's side, versions the event's message id
	// (MsgID): the step.done of a re-sent step with other calls. It is
	// not in the JSON.
	Version string `json:"-"`
	// MediaNotes, on the worker's side, holds beside each item the notes
	// of its parts, as CallOutput.MediaNotes. It is not in the JSON.
	MediaNotes [][]string `json:"-"`
}

// Verdict is what a task turn's step came to: step.done's task field.
type Verdict struct {
	WorkflowID string `json:"workflow_id"`
	TaskID     string `json:"task_id"`
	// Status is one of the Verdict* constants.
	Status string `json:"status"`
	// Result is the committed value (VerdictAccepted).
	Result json.RawMessage `json:"result,omitempty"`
	// Instruction is the one repair instruction (VerdictRepair): send it
	// to the model as the next user message.
	Instruction string `json:"instruction,omitempty"`
	// Reason says why the task failed (VerdictFailed), or why a
	// submission was not recorded (VerdictActive).
	Reason string `json:"reason,omitempty"`
}

// Verdict statuses, in [Verdict].Status.
const (
	// VerdictAccepted: the result is committed; the turn ends.
	VerdictAccepted = "accepted"
	// VerdictRejected: a submission broke the result schema; the call's
	// output lists each violation, and the turn goes on.
	VerdictRejected = "rejected"
	// VerdictRepair: the step called nothing; send Instruction.
	VerdictRepair = "repair"
	// VerdictFailed: the task failed (Reason); the turn ends.
	VerdictFailed = "failed"
	// VerdictActive: tools were called but nothing was submitted, or a
	// submission could not be recorded (Reason); the turn goes on.
	VerdictActive = "active"
)

// Ends reports whether the verdict ends the task turn.
func (v *Verdict) Ends() bool { return v.Status == VerdictAccepted || v.Status == VerdictFailed }

// FunctionCallOutput is the Responses API item answering a function_call.
// Its output is the text Output, or, when Content is set (a tool returned
// media: docs/protocol.md, "Media outputs"), the array Content instead.
type FunctionCallOutput struct {
	Type   string
	CallID string
	// Output is the text for the model. Decoded from an array, it is the
	// array's text parts joined with newlines, for readers that want the
	// text; the array itself is Content.
	Output string
	// Content, when set, is the output: Responses API input content.
	Content []InputContent
}

// Input content types of a function_call_output array.
const (
	ContentText  = "input_text"
	ContentImage = "input_image"
	ContentFile  = "input_file"
	// DetailAuto is the detail of every input_image: the provider picks.
	DetailAuto = "auto"
)

// InputContent is one part of a function_call_output array: input_text
// (Text), input_image (ImageURL, a data URL, and Detail) or input_file
// (Filename and FileData, a data URL). Each type is written with exactly
// its own fields.
type InputContent struct {
	Type     string
	Text     string
	ImageURL string
	Detail   string
	Filename string
	FileData string
}

type fcoWire struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

// MarshalJSON writes the output as a string, or as an array when Content
// is set; a text output is byte-identical to the item before media.
func (f FunctionCallOutput) MarshalJSON() ([]byte, error) {
	w := fcoWire{Type: f.Type, CallID: f.CallID, Output: f.Output}
	if len(f.Content) > 0 {
		w.Output = f.Content
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a string or an array output.
func (f *FunctionCallOutput) UnmarshalJSON(data []byte) error {
	var w struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*f = FunctionCallOutput{Type: w.Type, CallID: w.CallID}
	out := bytes.TrimLeft(w.Output, " \t\r\n")
	switch {
	case len(out) == 0 || out[0] == 'n':
		return nil
	case out[0] == '[':
		if err := json.Unmarshal(out, &f.Content); err != nil {
			return err
		}
		var texts []string
		for _, c := range f.Content {
			if c.Type == ContentText {
				texts = append(texts, c.Text)
			}
		}
		f.Output = strings.Join(texts, "\n")
		return nil
	}
	return json.Unmarshal(out, &f.Output)
}

// MarshalJSON writes the fields of the part's type, and only those.
func (c InputContent) MarshalJSON() ([]byte, error) {
	switch c.Type {
	case ContentImage:
		return json.Marshal(struct {
			Type     string `json:"type"`
			ImageURL string `json:"image_url"`
			Detail   string `json:"detail"`
		}{c.Type, c.ImageURL, c.Detail})
	case ContentFile:
		return json.Marshal(struct {
			Type     string `json:"type"`
			Filename string `json:"filename"`
			FileData string `json:"file_data"`
		}{c.Type, c.Filename, c.FileData})
	}
	return json.Marshal(struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}{c.Type, c.Text})
}

// UnmarshalJSON reads any part.
func (c *InputContent) UnmarshalJSON(data []byte) error {
	var w struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail"`
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
	}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = InputContent(w)
	return nil
}

// ToolSearchOutput is the Responses API item answering a client
// tool_search_call.
type ToolSearchOutput struct {
	Type      string            `json:"type"`
	CallID    string            `json:"call_id"`
	Execution string            `json:"execution"`
	Status    string            `json:"status"`
	Tools     []json.RawMessage `json:"tools"`
}

// Activity is published on turn.activity.<agent_id>.<turn_id>.
type Activity struct {
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	State  string `json:"state"` // started | completed | progress
	Label  string `json:"label"`
	// Progress is set when State is "progress" (protocol 1.1).
	Progress *Progress `json:"progress,omitempty"`
}

// Cancel is the optional body of turn.cancel.<agent_id>.<turn_id>.
type Cancel struct {
	Reason string `json:"reason"`
}

// CancelStep is the body of turn.cancel.step.<agent_id>.<turn_id>: it
// aborts the running calls of that one step of the turn on every worker
// (their outputs are aborted, the step's step.done follows) and leaves
// the turn and its other steps alone: no cancel mark is written. A step
// not running yet when it arrives runs; publish it again while the
// step's outputs have not come.
type CancelStep struct {
	Step   int64  `json:"step"`
	Reason string `json:"reason,omitempty"`
}

// CatalogRequest is the body of a turn.tools request.
type CatalogRequest struct {
	AgentID string  `json:"agent_id"`
	TurnID  string  `json:"turn_id"`
	Context Context `json:"context"`
}

// CatalogReply answers a turn.tools request.
type CatalogReply struct {
	Tools  json.RawMessage `json:"tools"`
	Digest string          `json:"digest"`
	// Notes tell the gateway about sources that could not contribute
	// (an MCP server that is down); the catalog is still usable.
	Notes []string `json:"notes,omitempty"`
	// Approval names the tools of the catalog whose calls wait for a
	// person's approval under the worker's configuration and this
	// context ("name", or "namespace.name"); it sits beside the tool
	// definitions, which keep only the Responses API's fields.
	Approval []string `json:"approval,omitempty"`
	// Hints are the tools' flags, by "name" or "namespace.name", for
	// gateways that describe tools to other clients (an MCP server's
	// readOnlyHint and destructiveHint); a tool without flags is left
	// out. Like Approval, they sit beside the definitions.
	Hints map[string]ToolHints `json:"hints,omitempty"`
}

// ToolHints are the flags of one tool of a catalog (tool.Spec's).
type ToolHints struct {
	ReadOnly    bool `json:"read_only,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
}

// Definitions splits Tools into its entries, each the worker's bytes:
// send them to the model unchanged, which keeps the provider's prompt
// cache.
func (c *CatalogReply) Definitions() ([]json.RawMessage, error) {
	var defs []json.RawMessage
	if err := json.Unmarshal(c.Tools, &defs); err != nil {
		return nil, err
	}
	return defs, nil
}

// Event is a message of a step's run, as a gateway reads it: a
// *CallOutput, *StepDone or *StepPending from TURN_OUTPUTS, or an
// *Activity from turn.activity.
type Event interface{ event() }

func (*CallOutput) event()  {}
func (*StepDone) event()    {}
func (*StepPending) event() {}
func (*Activity) event()    {}

// Subject, stream, consumer and bucket names of the protocol.
const (
	StreamCalls     = "TURN_CALLS"
	StreamTasks     = "TURN_TASKS"
	StreamOutputs   = "TURN_OUTPUTS"
	StreamDead      = "TURN_DEAD"
	StreamWorkflows = "WORKFLOW_EVENTS"
	ConsumerCalls   = "turn-workers"
	ConsumerTasks   = "task-workers"
	BucketState     = "TURN_STATE"
	BucketWorkflows = "WORKFLOWS"

	PrefixCall   = "turn.call"
	PrefixTask   = "turn.task"
	PrefixOutput = "turn.call.output"
	PrefixDead   = "turn.dead"
	PrefixCancel = "turn.cancel"
	// PrefixCancelStep's subjects have five tokens, so that the
	// subscriptions to PrefixCancel+".*.*" never see them.
	PrefixCancelStep = "turn.cancel.step"
	PrefixActive     = "turn.activity"
	PrefixWFEvt      = "workflow.event"

	SubjectTools = "turn.tools"
	ServiceName  = "turn-worker"
)

// Headers of a dead letter on turn.dead.<agent_id>.<turn_id>
// (PrefixDead): why and where from. The original's Nats-* headers are
// kept with the prefix HeaderDeadPrefix (protocol.HeaderDeadPrefix+jetstream.MsgIDHeader).
const (
	HeaderDeadPrefix    = "Dead-"
	HeaderDeadReason    = "Dead-Reason"
	HeaderDeadStreamSeq = "Dead-Stream-Seq"
	HeaderDeadStream    = "Dead-Stream"
	HeaderDeadSubject   = "Dead-Subject"
	// HeaderDeadTruncated is "true" on a dead letter that holds only the
	// head of the message: the whole did not fit the max payload with the
	// dead-letter headers added. HeaderDeadSize is then the size of the
	// original body, and HeaderDeadHeadersDropped set when the original
	// headers were left out too.
	HeaderDeadTruncated      = "Dead-Truncated"
	HeaderDeadSize           = "Dead-Size"
	HeaderDeadHeadersDropped = "Dead-Headers-Dropped"
)

// Subject joins a prefix with the agent and turn ids.
func Subject(prefix, agentID, turnID string) string {
	return prefix + "." + agentID + "." + turnID
}

// CallOutputMsgID is the Nats-Msg-Id of a call.output event: the step's
// id and the call's token (callToken).
func CallOutputMsgID(agentID, turnID string, step int64, callID string) string {
	return StepMsgID(agentID, turnID, step) + "." + callToken(callID)
}

// callToken is a call id as the last token of its call.output's message
// id: the id as sent, except that "done", "pending", or an id that starts
// with "~", gets a "~" in front, so that no call.output shares the id of
// step.done or step.pending (TURN_OUTPUTS would drop it as a duplicate); and
// an id that ends with a space is "~" and its unpadded base64url, because
// the client trims a header value's spaces and "c1 " would otherwise
// share the id of "c1" (and be dropped as its duplicate). No id as sent
// or with "~~" in front can be such an encoding: base64url has no "~",
// and "done" and "pending" are encodings only of bytes that do not end
// with a space.
func callToken(callID string) string {
	switch {
	case strings.HasSuffix(callID, " "):
		return "~" + KeyToken(callID)
	case callID == "done" || callID == "pending" || strings.HasPrefix(callID, "~"):
		return "~" + callID
	}
	return callID
}

// StepDoneMsgID is the Nats-Msg-Id of a step.done event.
func StepDoneMsgID(agentID, turnID string, step int64) string {
	return StepMsgID(agentID, turnID, step) + ".done"
}

// KeyToken encodes a call id (any printable text) as one KV key token.
func KeyToken(callID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(callID))
}

// CallKey is the TURN_STATE key of a call's claim and stored output.
func CallKey(agentID, turnID string, step int64, callID string) string {
	return "call." + agentID + "." + turnID + "." + strconv.FormatInt(step, 10) + "." + KeyToken(callID)
}

// TurnKey is the TURN_STATE key of per-turn state (cancel mark, loaded
// deferred tools, task repair count).
func TurnKey(agentID, turnID, what string) string {
	return "turn." + agentID + "." + turnID + "." + what
}
