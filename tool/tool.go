package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"
	"time"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/toolhooks"
	"github.com/agentbull/toolruntime/protocol"
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

// Spec is the part of a tool the runtime reads: what the model is told and
// how calls are scheduled. Name and Description are required; the zero
// value of every other field works.
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
	// Namespace groups related tools (an MCP server's) under one name,
	// which NamespaceDescription describes to the model.
	Namespace            string
	NamespaceDescription string
	// DeferLoading lists the tool by name only until the model loads it
	// with tool search (for large catalogs).
	DeferLoading bool
	// ExecutionMode defaults to Parallel for read-only tools and to
	// Sequential for every other tool.
	ExecutionMode Mode
	// ReadOnly tools change nothing, so they may run again after a worker
	// crashed while they ran.
	ReadOnly bool
	// Destructive tools never take a guessing repair of their arguments,
	// and must be sequential.
	Destructive bool
	// Timeout bounds one call; zero is the worker's --call-timeout.
	Timeout time.Duration
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
	// Events are the tool's presentation events for user interfaces,
	// which read them in the call's output event (protocol.CallOutput).
	// Each Data is JSON: marshal the value the interface reads.
	Events []protocol.PresentationEvent
	// CompleteActorEvent marks the actor event the turn answers as done.
	CompleteActorEvent bool
	// EndTurn asks the agent loop to stop after this step.
	EndTurn bool
}

// Def is a typed tool definition: the author writes Execute over decoded,
// validated parameters and never touches raw JSON.
//
// The parameters schema is inferred from P's exported fields with their
// json and jsonschema tags (github.com/invopop/jsonschema's syntax, e.g.
// `jsonschema:"description=…,minimum=1,enum=a,enum=b"`, or a whole tag as
// the description, in the MCP Go SDK's style). Fields without omitempty
// are required.
type Def[P any] struct {
	Spec
	// Activity builds a short progress label from the parameters, which
	// user interfaces show while the call runs ("Fetching https://…").
	Activity func(P) string
	// CompletedActivity, when set, replaces the label once the call ends.
	CompletedActivity func(P, Result) string
	// Execute does the work. ctx ends when the call's time is up or the
	// turn is cancelled, and carries the call's identity ([CallFrom]) and
	// its progress reporter ([ReportProgress]).
	Execute func(ctx context.Context, p P) (Result, error)
}

// Tool is a defined tool, ready to be put in a [Category]. It is
// immutable and shared by every turn that uses it.
type Tool struct {
	spec       Spec
	params     *schema.Params
	definition json.RawMessage
	// anchor holds what the worker reads of the tool (its schema, the
	// decoding of arguments into P), through internal/toolhooks.
	anchor
}

// anchor is embedded under this name so that the field stays unexported.
type anchor = toolhooks.Anchor[Result]

// args is one call's arguments decoded into a tool's parameters.
type args = toolhooks.Args[Result]

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// New defines a tool. The parameters schema comes from Spec.JSONSchema
// when set, otherwise it is inferred from P once. A definition a provider
// would refuse, or that could not run safely (no Execute, a bad name, a
// read-only destructive tool, a schema strict mode cannot express without
// Spec.NotStrict), is an error naming the tool.
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
	def, calls := &d, &sync.Pool{}
	// One allocation holds a call's decoded parameters, reused once the
	// worker releases it.
	newCall := func() *typedCall[P] {
		if c, ok := calls.Get().(*typedCall[P]); ok {
			return c
		}
		c := &typedCall[P]{def: def, pool: calls}
		c.pv = reflect.ValueOf(&c.p).Elem()
		return c
	}
	h := &toolhooks.Hooks[Result]{Params: params}
	bindP := schema.BinderFor[P]()
	h.Bind = func(v schema.Value) (args, error) {
		c := newCall()
		var err error
		if bindP != nil {
			err = bindP(v.V, &c.p)
		} else {
			// A type Bind does not cover: through the JSON text.
			err = v.Unmarshal(&c.p)
		}
		if err != nil {
			c.Release()
			return nil, &Error{Kind: InvalidArguments, Message: "arguments do not fit the tool's parameters: " + err.Error()}
		}
		c.label()
		return c, nil
	}
	if directP := schema.DirectValueFor[P](params); directP != nil {
		h.Direct = func(arguments string, spare args) args {
			c, ok := spare.(*typedCall[P])
			if !ok || c.def != def {
				if spare != nil {
					spare.Release()
				}
				c = newCall()
			}
			if !directP(arguments, c.pv) {
				c.Release()
				return nil
			}
			c.label()
			return c
		}
	}
	toolhooks.Set(&t.anchor, h)
	return t, nil
}

// Must is [New] for definitions fixed at compile time: a bad one panics.
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

// Schema is the parameters schema the model is sent (the "parameters" of
// Definition).
func (t *Tool) Schema() json.RawMessage { return t.params.Sent() }

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

// typedCall is one call's arguments decoded into P: the worker's
// toolhooks.Args of a tool made by New.
type typedCall[P any] struct {
	def      *Def[P]
	pool     *sync.Pool // of the tool's released calls
	p        P
	pv       reflect.Value // of p, for the direct parser
	activity string
}

// label builds the call's activity label from its parameters.
func (c *typedCall[P]) label() {
	if c.def.Activity != nil {
		c.activity = c.def.Activity(c.p)
	}
}

func (c *typedCall[P]) Activity() string { return c.activity }

func (c *typedCall[P]) Run(ctx context.Context) (Result, error) { return c.def.Execute(ctx, c.p) }

func (c *typedCall[P]) Completed(r Result) (string, bool) {
	if c.def.CompletedActivity == nil {
		return "", false
	}
	return c.def.CompletedActivity(c.p, r), true
}

// Release empties c (the parameters it decoded stay with those they were
// given to) and puts it back in its tool's pool.
func (c *typedCall[P]) Release() {
	c.Park()
	c.pool.Put(c)
}

// Park empties c, which its holder keeps as a spare.
func (c *typedCall[P]) Park() {
	var zero P
	c.p, c.activity = zero, ""
}
