package tools

import (
	"context"

	"github.com/agentbull/toolruntime/tool"
)

// ProgressFunc receives a running call's progress: done so far, total
// when known (0: unknown), and a short label (may be empty).
type ProgressFunc = func(done, total int64, label string)

// WithCall returns ctx carrying c, for tool.CallFrom.
func WithCall(ctx context.Context, c tool.Call) context.Context {
	return &tool.CallContext{Context: ctx, Call: c}
}

// WithProgress returns ctx whose calls to tool.ReportProgress reach f. The
// dispatcher sets it; it rate-limits what it publishes.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return &tool.CallContext{Context: ctx, Progress: f}
}
