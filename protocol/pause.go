package protocol

import (
	"context"
	"time"
)

// Pause waits d, or until ctx ends (then it returns ctx's cause): the
// pause between two tries of a client of the protocol, a gateway waiting
// for a stream no worker has created yet or a worker retrying a
// conflicting write of a bucket.
func Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
