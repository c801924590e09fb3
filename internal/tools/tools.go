package tools

import (
	"context"

	"github.com/agentbull/toolruntime/tool"
)

// The tool types, now at home in package tool: these aliases keep the
// packages that name them here compiling until they name tool's.
type (
	// Deprecated: use tool.Spec.
	Spec = tool.Spec
	// Deprecated: use tool.Def.
	Def[P any] = tool.Def[P]
	// Deprecated: use tool.Tool.
	Tool = tool.Tool
	// Deprecated: use tool.Result.
	Result = tool.Result
	// Deprecated: use tool.Media.
	Media = tool.Media
	// Deprecated: use tool.Event.
	Event = tool.Event
	// Deprecated: use tool.Mode.
	Mode = tool.Mode
	// Deprecated: use tool.Kind.
	Kind = tool.Kind
	// Deprecated: use tool.Error.
	Error = tool.Error
	// Deprecated: use tool.Call.
	Call = tool.Call
	// Deprecated: use tool.CallContext.
	CallContext = tool.CallContext
)

// Deprecated: use tool's constants of the same names.
const (
	Parallel   = tool.Parallel
	Sequential = tool.Sequential

	UnknownTool      = tool.UnknownTool
	NotLoaded        = tool.NotLoaded
	InvalidArguments = tool.InvalidArguments
	ToolError        = tool.ToolError
	Timeout          = tool.Timeout
	Aborted          = tool.Aborted
	Interrupted      = tool.Interrupted
	Rejected         = tool.Rejected
	Internal         = tool.Internal
)

// Deprecated: use tool.New.
func New[P any](d Def[P]) (*Tool, error) { return tool.New(d) }

// Deprecated: use tool.Must.
func Must[P any](d Def[P]) *Tool { return tool.Must(d) }

// Deprecated: use tool.Errorf.
func Errorf(kind Kind, format string, args ...any) *Error { return tool.Errorf(kind, format, args...) }

// Deprecated: use tool.CallFrom.
func CallFrom(ctx context.Context) (Call, bool) { return tool.CallFrom(ctx) }

// Deprecated: use tool.ReportProgress.
func ReportProgress(ctx context.Context, done, total int64, label string) {
	tool.ReportProgress(ctx, done, total, label)
}

// Deprecated: use tool.ProgressWanted.
func ProgressWanted(ctx context.Context) bool { return tool.ProgressWanted(ctx) }

// ProgressFunc receives a running call's progress: done so far, total
// when known (0: unknown), and a short label (may be empty).
type ProgressFunc = func(done, total int64, label string)

// WithCall returns ctx carrying c, for CallFrom.
func WithCall(ctx context.Context, c Call) context.Context {
	return &tool.CallContext{Context: ctx, Call: c}
}

// WithProgress returns ctx whose calls to ReportProgress reach f. The
// dispatcher sets it; it rate-limits what it publishes.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return &tool.CallContext{Context: ctx, Progress: f}
}
