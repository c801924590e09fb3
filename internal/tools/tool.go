package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime/debug"
	"time"

	"github.com/agentbull/toolruntime/internal/schema"
)

// Mode says whether a call may run beside the other calls of its step.
type Mode string

const (
	// Parallel calls that stand next to each other in a step run at once.
	Parallel Mode = "parallel"
	// Sequential calls start after every earlier call of the step has
	// ended, and no later call starts before they end.
	Sequential Mode = "sequential"
)

// Spec is the part of a tool the runtime reads: what the provider is told
// and how calls are scheduled. The zero value of each optional field works.
type Spec struct {
	// Name is what the model sees and calls: ^[a-zA-Z0-9_-]{1,64}$.
	Name string
	// Description is what the model reads to decide whether to call it.
	Description string
	// JSONSchema, when set, is the parameters schema sent as given instead
	// of the one inferred from the parameter type; every keyword is kept.
	JSONSchema json.RawMessage
	// Strict asks the provider to hold the arguments to the schema (the
	// Responses API's strict mode); the worker validates against the full
	// schema either way. A raw JSONSchema is sent strict only when Strict
	// is set: its owner (an MCP server, a skill library) decides. A schema
	// inferred from the parameter type is always sent strict, since strict
	// tools get fewer malformed calls, unless NotStrict says why not.
	Strict bool
	// NotStrict, for a tool whose schema is inferred, is why it is sent
	// without strict mode: required when the strict rewrite cannot express
	// the schema exactly (a map field, a keyword strict mode lacks), in
	// which case New fails without it.
	NotStrict string
	// Namespace groups related external tools into one provider namespace.
	Namespace            string
	NamespaceDescription string
	// DeferLoading keeps the schema behind tool search until it is loaded.
	DeferLoading bool
	// ExecutionMode defaults to Parallel for read-only tools and to
	// Sequential for every other tool.
	ExecutionMode Mode
	// ReadOnly tools change nothing: they may run again after a crash.
	ReadOnly bool
	// Destructive tools never take a guessing repair rung (every rung of
	// today's ladder is lossless), and must be sequential.
	Destructive bool
	// Timeout bounds one call; zero means the dispatcher's default.
	Timeout time.Duration
}

// Event is a presentation event a tool emits for user interfaces.
type Event struct {
	Type string `json:"type"`
	Data any    `json:"data,omitempty"`
}

// Result is what a tool returns.
type Result struct {
	// Content is the text the model reads.
	Content string
	// Media are images and files the model also reads (protocol 1.1),
	// after Content; the runtime fits them to the output budget.
	Media []Media
	// Details is structured data for logs and user interfaces; it is never
	// sent to the model. It must marshal to JSON.
	Details any
	// Events are the tool's presentation events.
	Events []Event
	// CompleteActorEvent marks the actor event the turn answers as done.
	CompleteActorEvent bool
	// EndTurn asks the loop to stop after this step.
	EndTurn bool
}

// Def is a typed tool definition: the author writes Execute over decoded,
// validated parameters and never touches raw JSON.
type Def[P any] struct {
	Spec
	// Activity builds a short progress label from the parameters.
	Activity func(P) string
	// CompletedActivity, when set, replaces the label once the call ends.
	CompletedActivity func(P, Result) string
	// Execute does the work. ctx carries the abort signal and the call's
	// identity (see CallFrom).
	Execute func(ctx context.Context, p P) (Result, error)
}

// Tool is a defined tool, ready to be put in a turn's set. It is immutable
// and shared by every turn that uses it.
type Tool struct {
	spec       Spec
	params     *schema.Params
	definition json.RawMessage
	prepare    func(v schema.Value) (*Invocation, error)
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New defines a tool. The parameters schema comes from Spec.JSONSchema
// when set, otherwise it is inferred from P once and cached. A definition
// that a provider would refuse, or that could not run safely, is an error
// naming the tool.
func New[P any](d Def[P]) (*Tool, error) {
	s := d.Spec
	fail := func(format string, args ...any) (*Tool, error) {
		return nil, fmt.Errorf("tool %q: %s", s.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case !validName.MatchString(s.Name):
		return fail("name must match %s", validName)
	case s.Description == "":
		return fail("description is empty")
	case s.Namespace != "" && !validName.MatchString(s.Namespace):
		return fail("namespace must match %s", validName)
	case d.Execute == nil:
		return fail("execute is nil")
	case s.ReadOnly && s.Destructive:
		return fail("a tool cannot be both read-only and destructive")
	case s.Timeout < 0:
		return fail("timeout is negative")
	}
	switch s.ExecutionMode {
	case "":
		s.ExecutionMode = Sequential
		if s.ReadOnly {
			s.ExecutionMode = Parallel
		}
	case Parallel:
		if s.Destructive {
			return fail("a destructive tool must be sequential")
		}
	case Sequential:
	default:
		return fail("execution mode %q is neither parallel nor sequential", s.ExecutionMode)
	}
	if s.Strict && s.NotStrict != "" {
		return fail("strict and not strict (%s) at once", s.NotStrict)
	}
	var (
		params *schema.Params
		err    error
	)
	if len(s.JSONSchema) > 0 {
		params, err = schema.Compile(s.JSONSchema, s.Strict)
	} else {
		s.Strict = s.NotStrict == ""
		params, err = schema.For[P](s.Strict)
		if err == nil && s.Strict && params.StrictInexact() != "" {
			err = errors.New(params.StrictInexact())
		}
		if err != nil && s.Strict && !errors.Is(err, schema.ErrNotObject) {
			return fail("its schema cannot be sent strict as it is (%v); set Spec.NotStrict to say why the tool is sent without strict mode", err)
		}
	}
	if err != nil {
		// Wrapped, so that callers can match schema.ErrNotObject.
		return nil, fmt.Errorf("tool %q: %w", s.Name, err)
	}
	t := &Tool{spec: s, params: params}
	t.definition = mustMarshal(functionDef{
		Type: "function", Name: s.Name, Description: s.Description,
		Parameters: params.Sent(), Strict: s.Strict,
	})
	def := &d
	t.prepare = func(v schema.Value) (*Invocation, error) {
		// One allocation holds the invocation and its decoded parameters.
		c := &typedCall[P]{def: def}
		bound, err := schema.Bind(v.V, &c.p)
		if !bound && err == nil {
			// A type Bind does not cover: through the JSON text.
			err = v.Unmarshal(&c.p)
		}
		if err != nil {
			return nil, &Error{Kind: InvalidArguments, Message: "arguments do not fit the tool's parameters: " + err.Error()}
		}
		c.inv = Invocation{Tool: t, call: c}
		if d.Activity != nil {
			c.inv.Activity = d.Activity(c.p)
		}
		return &c.inv, nil
	}
	return t, nil
}

// Must is New for definitions fixed at compile time: a bad one panics.
func Must[P any](d Def[P]) *Tool {
	t, err := New(d)
	if err != nil {
		panic(err)
	}
	return t
}

// Spec returns the tool's spec with defaults applied.
func (t *Tool) Spec() Spec { return t.spec }

// Name is the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Params is the compiled parameters schema.
func (t *Tool) Params() *schema.Params { return t.params }

// Definition is the Responses API function definition, full (never the
// deferred short form).
func (t *Tool) Definition() json.RawMessage { return t.definition }

type functionDef struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

func mustMarshal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs of strings and valid JSON reach here
	}
	return b
}

// Invocation is one call of a tool with validated, decoded parameters.
type Invocation struct {
	Tool *Tool
	// Repairs names the ladder rungs that made the arguments parse.
	Repairs []string
	// Activity is the progress label built from the parameters.
	Activity string
	call     call
}

// call is the typed half of an invocation.
type call interface {
	run(ctx context.Context) (Result, error)
	completed(Result) (string, bool)
}

type typedCall[P any] struct {
	inv Invocation
	def *Def[P]
	p   P
}

func (c *typedCall[P]) run(ctx context.Context) (Result, error) { return c.def.Execute(ctx, c.p) }

func (c *typedCall[P]) completed(r Result) (string, bool) {
	if c.def.CompletedActivity == nil {
		return "", false
	}
	return c.def.CompletedActivity(c.p, r), true
}

// Prepare validates (repairing where the tool allows it) and decodes the
// model's argument string. The error is an *Error of kind
// invalid_arguments whose message tells the model what to fix.
func (t *Tool) Prepare(args string, opt schema.RepairOptions) (*Invocation, error) {
	opt.Conservative = opt.Conservative || t.spec.Destructive
	v, repairs, err := t.params.ParseValue(args, opt)
	if err != nil {
		return nil, t.argumentsError(err, repairs)
	}
	inv, err := t.prepare(v)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			te.Repairs = repairs
		}
		return nil, err
	}
	inv.Repairs = repairs
	return inv, nil
}

// Run executes the call. A panic in the tool becomes a tool_error, and an
// error that is not an *Error becomes a tool_error with its text.
func (inv *Invocation) Run(ctx context.Context) (res Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Details: map[string]string{"panic": fmt.Sprint(r), "stack": string(debug.Stack())}}
			err = &Error{Kind: ToolError, Message: fmt.Sprintf("the tool failed unexpectedly: %v", r)}
		}
	}()
	res, err = inv.call.run(ctx)
	if err != nil {
		var te *Error
		if !errors.As(err, &te) {
			err = &Error{Kind: ToolError, Message: err.Error()}
		}
	}
	return res, err
}

// CompletedActivity is the label to show once the call ended with r.
func (inv *Invocation) CompletedActivity(r Result) string {
	if label, ok := inv.call.completed(r); ok {
		return label
	}
	return inv.Activity
}
