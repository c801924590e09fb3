package pause_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/pause"
)

func TestFor(t *testing.T) {
	if err := pause.For(context.Background(), time.Millisecond); err != nil {
		t.Errorf("a pause that ran out: %v", err)
	}
	cause := errors.New("shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	start := time.Now()
	if err := pause.For(ctx, time.Hour); err != cause {
		t.Errorf("a pause whose context ended: %v, want its cause", err)
	}
	if time.Since(start) > time.Minute {
		t.Error("the pause did not end with its context")
	}
}
