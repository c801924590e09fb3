package main

import (
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/fairshare"
)

// The timeline keeps only quiet steps it was told were published, and
// reports each stage's time since publishing, the slowest by step.done.
func TestTimelineReport(t *testing.T) {
	tl := newTimeline()
	t0 := time.Unix(1000, 0)
	for i, key := range []string{"quiet-0.a", "quiet-1.b"} {
		tl.mark(key, tlPublished, t0)
		for s := tlStored; s < tlStages; s++ {
			tl.mark(key, s, t0.Add(time.Duration((i+1)*s)*time.Millisecond))
		}
	}
	tl.stage(fairshare.StageTaken, "turn.call.burst.x") // not a quiet step: ignored
	tl.mark("quiet-2.c", tlDone, t0)                    // never published: ignored
	r := tl.report()
	if r.N != 2 || r.Slow != 1 {
		t.Fatalf("n=%d slow=%d, want 2 and 1", r.N, r.Slow)
	}
	if r.Tail[tlDone] != 10*time.Millisecond || r.Tail[tlTaken] != 4*time.Millisecond {
		t.Fatalf("slowest: %v", r.Tail)
	}
	var nilTL *timeline
	nilTL.mark("quiet-0.a", tlPublished, t0) // a nil timeline records nothing
	if nilTL.report() != nil {
		t.Fatal("a nil timeline reported")
	}
}
