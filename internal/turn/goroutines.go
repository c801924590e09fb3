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
//
// idle counts the kept goroutines that no call has been handed to. A
// goroutine counts itself in before it waits on work, and run counts one
// out before it hands a call over: the count is a reservation, so a call
// never goes to a new goroutine while a kept one is free, and a kept
// goroutine is never left waiting beside a call that started another
// (which a non-blocking send to a goroutine not yet at its receive did).
type Goroutines struct {
	work chan *pending
	idle atomic.Int64
	live atomic.Int64
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
	for {
		n := g.idle.Load()
		if n == 0 {
			g.live.Add(1)
			go g.serve(p)
			return
		}
		if g.idle.CompareAndSwap(n, n-1) {
			// The goroutine reserved is at its receive or on its way
			// there: this send waits no longer than that.
			g.work <- p
			return
		}
	}
}

func (g *Goroutines) serve(p *pending) {
	defer g.live.Add(-1)
	for {
		p.run()
		if !g.rest() {
			return
		}
		p = <-g.work
	}
}

// rest counts the goroutine idle, unless keep are already: then it is to
// end.
func (g *Goroutines) rest() bool {
	for {
		n := g.idle.Load()
		if n >= g.keep {
			return false
		}
		if g.idle.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// Idle reports how many goroutines wait for a call.
func (g *Goroutines) Idle() int { return int(g.idle.Load()) }

// Live reports how many goroutines the pool has: idle ones, and ones
// running a call (a hung tool's included).
func (g *Goroutines) Live() int { return int(g.live.Load()) }
