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
