package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/tool"
)

// Invocation is one call of a tool with validated, decoded parameters.
type Invocation struct {
	Tool *tool.Tool
	// Repairs names the ladder rungs that made the arguments parse.
	Repairs []string
	// Activity is the progress label built from the parameters.
	Activity string
	args     toolhooks.Args[tool.Result]
}

// Prepare validates (repairing where the tool allows it, at most
// repairLimit bytes; 0 is the default) and decodes the model's argument
// string. The error is an *Error of kind invalid_arguments whose message
// tells the model what to fix.
func Prepare(t *tool.Tool, args string, repairLimit int) (*Invocation, error) {
	inv := new(Invocation)
	if err := inv.Prepare(t, args, repairLimit); err != nil {
		return nil, err
	}
	return inv, nil
}

// Prepare is [Prepare] into inv, for a caller that holds the invocation
// in a larger value (the dispatcher's per-call state): one allocation
// fewer per call. Its refusal is the *tool.Error itself (kind
// invalid_arguments, with the rungs that ran in Repairs); on a refusal
// inv is left as it was, but for parked storage (Park): that goes back
// to its tool.
//
// An invocation parked by Park decodes into its own parked storage when
// it is t's, and hands it back to its tool otherwise.
func (inv *Invocation) Prepare(t *tool.Tool, args string, repairLimit int) *tool.Error {
	var parked toolhooks.Args[tool.Result]
	if inv.Tool == nil {
		parked = inv.args // parse reuses it or gives it back, whatever happens
	}
	a, repairs, err := parse(t, args, repairLimit, parked)
	if err != nil {
		if parked != nil {
			inv.args = nil
		}
		return prepareError(t, err, repairs)
	}
	inv.set(t, repairs, a.Activity(), a)
	return nil
}

// set fills inv field by field, writing only the fields that change: an
// invocation is most often set over a parked one (Park), whose storage
// it decoded into, and assigning a whole Invocation goes through the
// write barrier for every pointer slot in it while the collector marks.
func (inv *Invocation) set(t *tool.Tool, repairs []string, activity string, a toolhooks.Args[tool.Result]) {
	inv.Tool = t
	if repairs != nil || inv.Repairs != nil {
		inv.Repairs = repairs
	}
	if len(activity) != 0 || len(inv.Activity) != 0 {
		inv.Activity = activity
	}
	if inv.args != a {
		inv.args = a
	}
}

// Reset empties inv for reuse, writing only the fields that are set (see
// set). Its parameters are dropped, not released: Park or Release them
// instead to reuse their storage.
func (inv *Invocation) Reset() {
	if inv.Tool != nil {
		inv.Tool = nil
	}
	inv.dropNotes()
	if inv.args != nil {
		inv.args = nil
	}
}

// dropNotes empties the repairs and the activity label, writing only the
// ones that are set (see set).
func (inv *Invocation) dropNotes() {
	if inv.Repairs != nil {
		inv.Repairs = nil
	}
	if len(inv.Activity) != 0 {
		inv.Activity = ""
	}
}

// parse checks a call's arguments before the tool runs: the model's
// argument string (JSON, or what the model sent instead) goes up the
// repair ladder when it does not parse (at most repairLimit bytes of it,
// 0 for the default 64 KiB; a destructive tool takes no guessing rung),
// is validated against the tool's full schema and decoded into its
// parameters. repairs names the rungs that made the arguments parse, on
// an error too. The error says what is wrong (argumentsError words it
// for the model), or is an *Error of kind invalid_arguments when the
// validated value does not decode into the parameters.
func parse(t *tool.Tool, arguments string, repairLimit int, spare toolhooks.Args[tool.Result]) (a toolhooks.Args[tool.Result], repairs []string, err error) {
	h := toolhooks.Of[tool.Result](t)
	if h.Direct != nil {
		if a := h.Direct(arguments, spare); a != nil {
			return a, nil, nil
		}
	} else if spare != nil {
		spare.Release()
	}
	v, repairs, err := parseValue(t, h, arguments, repairLimit)
	if err != nil {
		return nil, repairs, err
	}
	a, err = h.Bind(v)
	return a, repairs, err
}

// Validate is what Prepare checks, without the decoding: the arguments as
// validated, as JSON text (as the model sent them when they needed no
// repair), and the rungs that repaired them. The error is parse's, not
// yet worded for the model.
func Validate(t *tool.Tool, arguments string, repairLimit int) (valid json.RawMessage, repairs []string, err error) {
	v, repairs, err := parseValue(t, toolhooks.Of[tool.Result](t), arguments, repairLimit)
	if err != nil {
		return nil, repairs, err
	}
	valid, err = v.JSON()
	return valid, repairs, err
}

func parseValue(t *tool.Tool, h *toolhooks.Hooks[tool.Result], arguments string, repairLimit int) (schema.Value, []string, error) {
	return h.Params.ParseValue(arguments, schema.RepairOptions{Limit: repairLimit, Conservative: t.Spec().Destructive})
}

// prepareError is out of Prepare's way so that the error target of
// errors.As is allocated only when there is an error.
func prepareError(t *tool.Tool, err error, repairs []string) *tool.Error {
	var te *tool.Error
	if errors.As(err, &te) {
		te.Repairs = repairs
		return te
	}
	return argumentsError(t, err, repairs)
}

// Run executes the call. A panic in the tool becomes a tool_error, and an
// error that is not an *Error becomes a tool_error with its text.
func (inv *Invocation) Run(ctx context.Context) (res tool.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res = tool.Result{Details: map[string]string{"panic": fmt.Sprint(r), "stack": string(debug.Stack())}}
			err = &tool.Error{Kind: tool.ToolError, Message: fmt.Sprintf("the tool failed unexpectedly: %v", r)}
		}
	}()
	res, err = inv.args.Run(ctx)
	if err != nil {
		var te *tool.Error
		if !errors.As(err, &te) {
			err = &tool.Error{Kind: tool.ToolError, Message: err.Error()}
		}
	}
	return res, err
}

// Release hands the decoded parameters back to the tool for reuse once
// the call is over, so that a later Prepare reuses their storage instead
// of allocating; inv is not run again. Releasing is optional: an
// invocation never released is collected as usual.
func (inv *Invocation) Release() {
	if inv.args != nil {
		inv.args.Release()
		inv.args = nil
	}
}

// Park ends a prepared invocation, as [Invocation.Reset] does, but keeps
// its decoded parameters' storage, emptied, in inv for its next Prepare
// (of the same tool; another tool's gives it back to its tool then). A
// dispatcher's per-call state that parks its invocation between steps so
// writes no pointer for the storage: the parameters stay where they are,
// where moving them to a spare and back took eight pointer writes a call
// (write barriers while the collector marks). A parked invocation is not
// prepared: its Tool is nil. Park does nothing to one that is not
// prepared.
func (inv *Invocation) Park() {
	if inv.Tool == nil {
		return
	}
	inv.Tool = nil
	inv.dropNotes()
	if inv.args != nil {
		inv.args.Park()
	}
}

// CompletedActivity is the label to show once the call ended with r:
// the tool's CompletedActivity when it has one, otherwise Activity.
func (inv *Invocation) CompletedActivity(r tool.Result) string {
	if label, ok := inv.args.Completed(r); ok {
		return label
	}
	return inv.Activity
}

// maxShapeBytes bounds the schema quoted back to the model in an
// invalid_arguments message.
const maxShapeBytes = 4 << 10

// argumentsError turns a parse or validation failure into the message the
// model reads: every violation with its JSON pointer, and the expected
// shape so that the next call can be right in one try.
func argumentsError(t *tool.Tool, err error, repairs []string) *tool.Error {
	var b strings.Builder
	fmt.Fprintf(&b, "The arguments for %s were rejected.\n", t.Name())
	var ve *schema.ValidationError
	switch {
	case errors.As(err, &ve):
		b.WriteString("Violations (JSON pointer: problem):\n")
		WriteViolations(&b, ve.Violations)
	default:
		// A *schema.SyntaxError is one sentence saying what is wrong,
		// where, and what to send instead.
		b.WriteString(err.Error())
		b.WriteByte('\n')
	}
	if len(repairs) > 0 {
		fmt.Fprintf(&b, "(Repairs applied before this check: %s.)\n", strings.Join(repairs, ", "))
	}
	shape := t.Schema()
	if len(shape) > maxShapeBytes {
		fmt.Fprintf(&b, "Send a JSON object that matches the tool's parameters schema (%d bytes, see the tool definition).", len(shape))
	} else {
		fmt.Fprintf(&b, "Expected a JSON object matching this schema: %s", shape)
	}
	return &tool.Error{Kind: tool.InvalidArguments, Message: b.String(), Repairs: repairs}
}

// Bounds of a violation list the model reads: a model that sends 60,000
// wrong items needs the first few and the count, not 3 MB of the same
// line (which would not fit one event either).
const (
	MaxViolations     = 50
	maxViolationBytes = 300
)

// WriteViolations writes the first MaxViolations of vs as "- pointer:
// problem" lines, each clipped, and then how many more there are.
func WriteViolations(b *strings.Builder, vs []schema.Violation) {
	for i, v := range vs {
		if i == MaxViolations {
			fmt.Fprintf(b, "- … and %d more violation%s\n", len(vs)-i, Plural(len(vs)-i))
			return
		}
		ptr := v.Pointer
		if ptr == "" {
			ptr = "/"
		}
		b.WriteString(textclip.Runes("- "+ptr+": "+v.Message, maxViolationBytes))
		b.WriteByte('\n')
	}
}
