package turn

import (
	"context"
	"errors"
	"testing"

	"github.com/agentbull/toolruntime/internal/tools"
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

// Every cancel recorded before the context is made (the shared marks of
// the common causes, a cause of its own, a parent that ended first)
// reads, before and after the context is made, as it would on a
// context.WithCancelCause cancelled the same way: Err, Cause, Done. (A
// context made before its parent ended is no child of it: the step's
// abort cancels it with the parent's cause, so that case is left out.)
func TestLazyCancelAsMade(t *testing.T) {
	other := errors.New("the turn was cancelled")
	for _, tc := range []struct {
		name         string
		cause        error
		parentBefore error // the parent's cause when it ends before the cancel
		parentAfter  error // ... after it
	}{
		{name: "ended", cause: nil},
		{name: "canceled", cause: context.Canceled},
		{name: "timed out", cause: tools.ErrTimedOut},
		{name: "its own", cause: other},
		{name: "parent first", cause: tools.ErrTimedOut, parentBefore: other},
		{name: "parent after", cause: tools.ErrTimedOut, parentAfter: other},
		{name: "not cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cancelled := tc.name != "not cancelled"
			for _, lookEarly := range []bool{false, true} {
				if lookEarly && tc.parentBefore != nil {
					continue
				}
				parent, end := context.WithCancelCause(context.Background())
				c := &lazyCancel{parent: parent}
				eager, cancel := context.WithCancelCause(context.Background())
				if lookEarly {
					_ = c.Done() // made before anything ends
				}
				if tc.parentBefore != nil {
					end(tc.parentBefore)
					cancel(tc.parentBefore)
				}
				if cancelled {
					c.with(tc.cause)
					cancel(tc.cause)
				}
				if tc.parentAfter != nil {
					end(tc.parentAfter)
				}
				if got, want := c.Err(), eager.Err(); got != want {
					t.Errorf("early %v: Err %v, want %v", lookEarly, got, want)
				}
				if got, want := context.Cause(c), context.Cause(eager); got != want {
					t.Errorf("early %v: Cause %v, want %v", lookEarly, got, want)
				}
				select {
				case <-c.Done():
					if !cancelled {
						t.Errorf("early %v: done, never cancelled", lookEarly)
					}
				default:
					if cancelled {
						t.Errorf("early %v: not done", lookEarly)
					}
				}
				c.with(errors.New("later")) // the first cause stays
				if got, want := context.Cause(c), context.Cause(eager); cancelled && got != want {
					t.Errorf("early %v: a later cancel made the cause %v, want %v", lookEarly, got, want)
				}
				end(nil)
				cancel(nil)
			}
		})
	}
}
