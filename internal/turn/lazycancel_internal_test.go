package turn

import (
	"context"
	"errors"
	"testing"
)

// A cause recorded before the context is made stays its cause when the
// parent ends before the first look (the call's time ran out, then the
// turn was aborted), and a parent that ended first keeps its own: as an
// eagerly made context would have it.
func TestLazyCancelFirstCauseStays(t *testing.T) {
	timedOut, aborted := errors.New("timed out"), errors.New("aborted")
	parent, cancel := context.WithCancelCause(context.Background())
	c := &lazyCancel{parent: parent}
	c.with(timedOut)
	cancel(aborted)
	if got := context.Cause(c); !errors.Is(got, timedOut) {
		t.Fatalf("cause %v, want %v", got, timedOut)
	}

	parent, cancel = context.WithCancelCause(context.Background())
	c = &lazyCancel{parent: parent}
	cancel(aborted)
	c.with(timedOut)
	if got := context.Cause(c); !errors.Is(got, aborted) {
		t.Fatalf("cause %v, want %v", got, aborted)
	}
	if c.Err() == nil {
		t.Fatal("not cancelled")
	}
}
