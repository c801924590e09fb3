// Package pause holds the wait between two tries of a client of the
// protocol: a gateway waiting for a stream no worker has created yet, a
// worker retrying a conflicting write of a bucket. The caller tries, calls
// For, and tries again unless For returned its context's cause.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends (then it returns ctx's cause).
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
