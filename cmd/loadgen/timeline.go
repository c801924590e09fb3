package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentbull/toolruntime/internal/fairshare"
)

// The stages of a quiet step's timeline, in order: published by the
// gateway, stored (the stream's ack back at the gateway), delivered to the
// worker's intake, given a slot, handled (its events published), its
// step.done received by the gateway.
const (
	tlPublished = iota
	tlStored
	tlTaken
	tlStarted
	tlHandled
	tlDone
	tlStages
)

var tlNames = [tlStages]string{"published", "stored", "taken by the intake", "given a slot", "handled", "step.done received"}

// timeline times the quiet steps of the burst through each stage. A nil
// *timeline records nothing.
type timeline struct {
	mu    sync.Mutex
	steps map[string]*[tlStages]time.Time // agent.turn -> when each stage was reached
}

func newTimeline() *timeline { return &timeline{steps: map[string]*[tlStages]time.Time{}} }

// stage is the workers' fairshare.Intake.Stage: it keeps only the quiet
// steps the timeline was told were published.
func (t *timeline) stage(stage, subject string) {
	var i int
	switch stage {
	case fairshare.StageTaken:
		i = tlTaken
	case fairshare.StageStarted:
		i = tlStarted
	case fairshare.StageHandled:
		i = tlHandled
	default:
		return
	}
	// turn.call.<agent>.<turn>
	rest, ok := strings.CutPrefix(subject, "turn.call.quiet-")
	if !ok {
		return
	}
	t.mark("quiet-"+rest, i, time.Now())
}

func (t *timeline) mark(key string, stage int, at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.steps[key]
	if s == nil {
		if stage != tlPublished {
			return
		}
		s = &[tlStages]time.Time{}
		t.steps[key] = s
	}
	if s[stage].IsZero() {
		s[stage] = at
	}
}

// timelineReport is each stage's time since publishing: p50 and p99 over
// the quiet steps of the burst, and the median over the slowest 1% (by
// step.done), which is where the p99 is made.
type timelineReport struct {
	N, Slow        int
	P50, P99, Tail [tlStages]time.Duration
}

func (t *timeline) report() *timelineReport {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	var all [][tlStages]time.Duration
	for _, s := range t.steps {
		complete := true
		var d [tlStages]time.Duration
		for i := range tlStages {
			if s[i].IsZero() {
				complete = false
				break
			}
			d[i] = s[i].Sub(s[tlPublished])
		}
		if complete {
			all = append(all, d)
		}
	}
	t.mu.Unlock()
	r := &timelineReport{N: len(all)}
	if len(all) == 0 {
		return r
	}
	slices.SortFunc(all, func(a, b [tlStages]time.Duration) int { return int(a[tlDone] - b[tlDone]) })
	slow := all[min(len(all)-1, len(all)*99/100):]
	r.Slow = len(slow)
	for i := range tlStages {
		col := make([]time.Duration, len(all))
		for j, d := range all {
			col[j] = d[i]
		}
		r.P50[i], r.P99[i], _ = percentiles(col)
		tail := make([]time.Duration, len(slow))
		for j, d := range slow {
			tail[j] = d[i]
		}
		r.Tail[i], _, _ = percentiles(tail)
	}
	return r
}

func (r *timelineReport) print(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "quiet steps' timeline during the burst (time since published; n=%d, slowest %d):\n", r.N, r.Slow)
	for i := tlStored; i < tlStages; i++ {
		fmt.Fprintf(w, "  %-20s p50=%-10s p99=%-10s slowest=%s\n", tlNames[i], r.P50[i].Round(10*time.Microsecond), r.P99[i].Round(10*time.Microsecond), r.Tail[i].Round(10*time.Microsecond))
	}
}
