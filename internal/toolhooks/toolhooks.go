package toolhooks

import (
	"context"

	"github.com/agentbull/toolruntime/internal/schema"
)

// Args are one call's arguments decoded into its tool's parameters. R is
// tool.Result, which this package cannot name (package tool imports it).
type Args[R any] interface {
	// Activity is the progress label the tool built from the parameters
	// (tool.Def.Activity); empty without one.
	Activity() string
	// Run calls the tool's Execute with the parameters. A panic is the
	// caller's to recover.
	Run(ctx context.Context) (R, error)
	// Completed is the label to show once the call ended with r, and
	// whether the tool builds one (tool.Def.CompletedActivity).
	Completed(r R) (string, bool)
	// Release hands the arguments' storage back to the tool, for a later
	// call to reuse. Neither they nor anything Run or Completed returned
	// of them may be used after; the parameters Run and Completed passed
	// on are copies, their holders' own.
	Release()
	// Park empties the arguments' storage and leaves it with its holder,
	// who hands it to a later Direct of any tool as its spare, instead of
	// back to the tool now: a dispatcher that runs calls of the same tools
	// step after step saves the tool's pool a round trip per call.
	Park()
}

// Hooks are what the worker reads of one tool.
type Hooks[R any] struct {
	// Params is the tool's compiled parameters schema.
	Params *schema.Params
	// Bind decodes a value validated against Params into the parameters.
	// Its error is the tool's *tool.Error of kind invalid_arguments.
	Bind func(v schema.Value) (Args[R], error)
	// Direct, when set, decodes arguments that are plain, valid JSON
	// straight into the parameters, and returns nil for any others,
	// which take Params' general path and Bind.
	// spare, when not nil, is a parked Args the caller hands over
	// whatever happens: Direct fills it when it is the tool's own, and
	// releases it otherwise.
	Direct func(arguments string, spare Args[R]) Args[R]
}

// Anchor holds a tool's hooks; package tool embeds one in every Tool.
type Anchor[R any] struct{ h *Hooks[R] }

// Set makes a hold h.
func Set[R any](a *Anchor[R], h *Hooks[R]) { a.h = h }

func (a *Anchor[R]) hooks() *Hooks[R] { return a.h }

// Holder is a type that embeds an Anchor: *tool.Tool.
type Holder[R any] interface{ hooks() *Hooks[R] }

// Of returns t's hooks: nil for a tool that tool.New did not make.
func Of[R any](t Holder[R]) *Hooks[R] { return t.hooks() }

// CallKey and ProgressKey are the context keys of a call's identity
// (a tool.Call, for tool.CallFrom) and of its progress receiver (a
// func(done, total int64, label string), for tool.ReportProgress).
type (
	CallKey     struct{}
	ProgressKey struct{}
)
