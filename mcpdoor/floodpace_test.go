package mcpdoor

import (
	"testing"
	"time"
)

// TestPacerHoldsThenRefuses reserves, at one instant, more tokens than a
// bucket has: the burst goes at once, the next heldMax are held back,
// each one token's time later than the last, and the rest are refused
// with when to retry. Another key's bucket is untouched.
func TestPacerHoldsThenRefuses(t *testing.T) {
	p := newPacer(10) // burst 10, a token every 100 ms
	now := time.Unix(1000, 0)
	for i := range 10 {
		if d, ok, _ := p.reserve("noisy", 1, now); !ok || d != 0 {
			t.Fatalf("request %d within the burst: delay %s ok %v", i, d, ok)
		}
	}
	last := time.Duration(0)
	for i := range heldMax {
		d, ok, _ := p.reserve("noisy", 1, now)
		if !ok || d <= last || d > time.Duration(i+1)*100*time.Millisecond+time.Millisecond {
			t.Fatalf("held request %d: delay %s (last %s) ok %v", i, d, last, ok)
		}
		last = d
	}
	if d, ok, retry := p.reserve("noisy", 1, now); ok || retry <= 0 {
		t.Fatalf("a request past heldMax held: delay %s ok %v retry %s", d, ok, retry)
	}
	if d, ok, _ := p.reserve("quiet", 1, now); !ok || d != 0 {
		t.Fatalf("another principal's request waits for the flood: delay %s ok %v", d, ok)
	}
	// The held requests end; a token's time later one request goes at
	// once again only once the promised tokens are paid back.
	for range heldMax {
		p.unhold("noisy")
	}
	later := now.Add(time.Duration(heldMax+1) * 100 * time.Millisecond)
	if d, ok, _ := p.reserve("noisy", 1, later); !ok || d != 0 {
		t.Fatalf("after the held tokens are paid back: delay %s ok %v", d, ok)
	}
	// A weight of 2 doubles the burst.
	for i := range 20 {
		if d, ok, _ := p.reserve("heavy", 2, now); !ok || d != 0 {
			t.Fatalf("request %d of weight 2 within its burst: delay %s ok %v", i, d, ok)
		}
	}
	if d, _, _ := p.reserve("heavy", 2, now); d <= 0 || d > 51*time.Millisecond {
		t.Fatalf("weight 2 over its burst: delay %s, want about 50 ms", d)
	}
}
