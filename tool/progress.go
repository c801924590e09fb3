package tool

import (
	"context"

	"github.com/agentbull/toolruntime/internal/toolhooks"
)

// ReportProgress reports the progress of the call ctx runs: done so far,
// total when known (0: unknown) and a short label (may be empty). User
// interfaces see it as the call's activity; the worker rate-limits what it
// publishes, so a tool may call it as often as it likes, and it costs
// nothing when nobody listens.
func ReportProgress(ctx context.Context, done, total int64, label string) {
	if f, ok := ctx.Value(toolhooks.ProgressKey{}).(func(int64, int64, string)); ok {
		f(done, total, label)
	}
}

// ProgressWanted reports whether ctx has a progress listener, so that a
// tool can skip preparing reports (a label, a request for an MCP
// server's notifications) nobody reads.
func ProgressWanted(ctx context.Context) bool {
	_, ok := ctx.Value(toolhooks.ProgressKey{}).(func(int64, int64, string))
	return ok
}
