package computer

import (
	"context"
	"errors"
	"testing"
)

// The first walk that finds a home over its quota stops every command
// of that home that began below what it found, and no other: a command
// that began with the home already bigger (an rm in a home over its
// quota) runs on, and so does a command of another agent's home.
func TestStopGrownStopsTheHomesWriters(t *testing.T) {
	q := newQuotas(8<<20, 1000)
	a, b := &home{agent: "a"}, &home{agent: "b"}
	type cmd struct {
		name   string
		h      *home
		start  usage
		stopIt bool
	}
	cmds := []cmd{
		{"a's first writer", a, usage{bytes: 1 << 20, files: 3}, true},
		{"a's second writer", a, usage{bytes: 6 << 20}, true},
		{"a's rm, begun at 40 MiB", a, usage{bytes: 40 << 20, files: 100}, false},
		{"b's writer", b, usage{bytes: 1 << 20}, false},
	}
	ctxs := make([]context.Context, len(cmds))
	for i, c := range cmds {
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		ctxs[i] = ctx
		q.register(&follower{q: q, h: c.h, start: c.start}, cancel)
	}
	q.stopGrown(a, &usage{bytes: 20 << 20, files: 30})
	for i, c := range cmds {
		stopped := errors.Is(context.Cause(ctxs[i]), errOverQuota)
		if stopped != c.stopIt {
			t.Errorf("%s: stopped %v, want %v", c.name, stopped, c.stopIt)
		}
	}
	if len(q.running["a"]) != 3 || len(q.running["b"]) != 1 {
		t.Errorf("running: %v", q.running)
	}
	for f := range q.running["a"] {
		q.unregister(f)
	}
	if _, ok := q.running["a"]; ok {
		t.Errorf("a's followers stay registered: %v", q.running["a"])
	}
}
