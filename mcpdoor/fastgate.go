package mcpdoor

import (
	"context"
	"time"
)

// admitWait is how long a principal's request over its bound waits for
// a slot before it is refused.
const admitWait = 250 * time.Millisecond

// gate is one principal's slots on this replica: calls for tools/call
// requests, other for the rest. A slot is a token in the channel.
type gate struct {
	calls, other chan struct{}
}

// gateOf is the principal's gate, made on its first request with limit
// slots of each kind. A principal's limit is fixed by its entry, so a
// gate made once stays right.
func (d *Door) gateOf(name string, limit int) *gate {
	d.flightMu.Lock()
	defer d.flightMu.Unlock()
	g := d.gates[name]
	if g == nil || cap(g.calls) != limit {
		g = &gate{calls: make(chan struct{}, limit), other: make(chan struct{}, limit)}
		d.gates[name] = g
	}
	return g
}

// fairGate is the door's work slots (floodfair.go), made on first use.
func (d *Door) fairGate() *fairGate {
	d.flightMu.Lock()
	defer d.flightMu.Unlock()
	if d.fair == nil {
		d.fair = newFairGate(workSlots())
	}
	return d.fair
}

// enter takes a slot of slots, waiting up to admitWait; release gives it
// back.
func (g *gate) enter(ctx context.Context, ch chan struct{}) (release func(), ok bool) {
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	default:
	}
	t := time.NewTimer(admitWait)
	defer t.Stop()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}
