package tools

import "context"

// ProgressFunc receives a running call's progress: done so far, total
// when known (0: unknown), and a short label (may be empty).
type ProgressFunc func(done, total int64, label string)

type progressKey struct{}

// WithProgress returns ctx whose calls to ReportProgress reach f. The
// dispatcher sets it; it rate-limits what it publishes.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// ReportProgress reports the progress of the call ctx runs; it costs
// nothing when nobody listens, and may be called as often as the tool
// likes.
func ReportProgress(ctx context.Context, done, total int64, label string) {
	if f, ok := ctx.Value(progressKey{}).(ProgressFunc); ok && f != nil {
		f(done, total, label)
	}
}

// ProgressWanted reports whether ctx has a progress listener, so that a
// tool can skip preparing reports (a label, a request for an MCP
// server's notifications) nobody reads.
func ProgressWanted(ctx context.Context) bool {
	f, ok := ctx.Value(progressKey{}).(ProgressFunc)
	return ok && f != nil
}
