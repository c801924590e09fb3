package turn

import "sync/atomic"

// Goroutines runs calls on goroutines it keeps between calls. A call's
// goroutine claims the call, stores its outcome and publishes its event:
// deep enough that a fresh goroutine grew its stack two or three times
// per call, which under load was a tenth of the worker's own CPU. A kept
// goroutine has grown it already.
//
// A call that never returns (a hung tool) only keeps its goroutine busy:
// when none is idle, another is started. Up to keep goroutines wait for
// work; the ones beyond that end when their call is over.
type Goroutines struct {
	work chan *pending
	idle atomic.Int64
	keep int64
}

// NewGoroutines returns a pool that keeps up to keep idle goroutines.
func NewGoroutines(keep int) *Goroutines {
	return &Goroutines{work: make(chan *pending), keep: int64(keep)}
}

// run runs p.run on an idle goroutine, or on a new one when none is idle.
// A nil pool starts a goroutine every time.
func (g *Goroutines) run(p *pending) {
	if g == nil {
		go p.run()
		return
	}
	select {
	case g.work <- p:
	default:
		go g.serve(p)
	}
}

func (g *Goroutines) serve(p *pending) {
	for {
		p.run()
		if g.idle.Add(1) > g.keep {
			g.idle.Add(-1)
			return
		}
		p = <-g.work
		g.idle.Add(-1)
	}
}

// Idle reports how many goroutines wait for a call.
func (g *Goroutines) Idle() int { return int(g.idle.Load()) }
