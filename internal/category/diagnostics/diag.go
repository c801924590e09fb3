// Package diagnostics provides the diagnostics category: small real tools for
// smoke tests, load runs and fault drills (ping, sleep, mark, finish).
// The category exists only when the worker enables it and the turn binds
// "diagnostics".
package diagnostics

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentbull/toolruntime/internal/pause"
	"github.com/agentbull/toolruntime/tool"
)

// Binding is the context binding that enables the category for a turn.
const Binding = "diagnostics"

// Config configures the category.
type Config struct {
	// MarkDir is where mark appends its lines; empty disables mark.
	MarkDir string
}

// PingParams are ping's parameters.
type PingParams struct {
	Note string `json:"note,omitempty" jsonschema:"description=Any text; echoed back."`
}

// SleepParams are sleep's parameters.
type SleepParams struct {
	MS int `json:"ms" jsonschema:"description=How long to wait in milliseconds.,minimum=0,maximum=600000"`
	// ReportEveryMS is how often the wait reports its progress; the
	// dispatcher publishes at most a few reports a second, so a small
	// value floods its rate limit on purpose.
	ReportEveryMS int `json:"report_every_ms,omitempty" jsonschema:"description=How often to report progress while waiting\\, in milliseconds (default 100).,minimum=1,maximum=600000"`
}

// sleepReportEvery is how often sleep reports progress by default.
const sleepReportEvery = 100 * time.Millisecond

// MarkParams are mark's parameters.
type MarkParams struct {
	Label string `json:"label" jsonschema:"description=The line to append.,pattern=^[A-Za-z0-9_.:-]{1\\,128}$"`
	MS    int    `json:"ms,omitempty" jsonschema:"description=How long to wait after appending\\, in milliseconds.,minimum=0,maximum=600000"`
}

// FinishParams are finish's parameters.
type FinishParams struct {
	Summary string `json:"summary" jsonschema:"description=What the turn achieved."`
}

// Tools builds the category's tools once; Category hands them to every
// turn that binds the category.
func Tools(cfg Config) []*tool.Tool {
	ts := []*tool.Tool{
		tool.Must(tool.Def[PingParams]{
			Spec:     tool.Spec{Name: "ping", Description: "Answer pong at once. A no-op for health checks and load runs.", ReadOnly: true},
			Activity: func(PingParams) string { return "Pinging" },
			Execute: func(_ context.Context, p PingParams) (tool.Result, error) {
				return tool.Result{Content: "pong " + p.Note}, nil
			},
		}),
		tool.Must(tool.Def[SleepParams]{
			Spec:     tool.Spec{Name: "sleep", Description: "Wait for the given number of milliseconds, reporting progress as it waits, then answer.", ReadOnly: true},
			Activity: func(p SleepParams) string { return fmt.Sprintf("Waiting %d ms", p.MS) },
			Execute: func(ctx context.Context, p SleepParams) (tool.Result, error) {
				every := sleepReportEvery
				if p.ReportEveryMS > 0 {
					every = time.Duration(p.ReportEveryMS) * time.Millisecond
				}
				if err := sleep(ctx, p.MS, every); err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: fmt.Sprintf("waited %d ms", p.MS)}, nil
			},
		}),
		tool.Must(tool.Def[FinishParams]{
			Spec:     tool.Spec{Name: "finish", Description: "End the turn with a summary.", ReadOnly: true},
			Activity: func(FinishParams) string { return "Finishing" },
			Execute: func(_ context.Context, p FinishParams) (tool.Result, error) {
				return tool.Result{Content: p.Summary, EndTurn: true}, nil
			},
		}),
	}
	if cfg.MarkDir != "" {
		var mu sync.Mutex
		ts = append(ts, tool.Must(tool.Def[MarkParams]{
			Spec: tool.Spec{Name: "mark", Description: "Append a line to this worker's mark file, then wait. Not read-only: each run leaves a trace.",
				ExecutionMode: tool.Sequential},
			Activity: func(p MarkParams) string { return "Marking " + p.Label },
			Execute: func(ctx context.Context, p MarkParams) (tool.Result, error) {
				mu.Lock()
				f, err := os.OpenFile(filepath.Join(cfg.MarkDir, "marks.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					_, err = f.WriteString(p.Label + "\n")
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				mu.Unlock()
				if err != nil {
					return tool.Result{}, err
				}
				if err := pause.For(ctx, time.Duration(p.MS)*time.Millisecond); err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: "marked " + p.Label}, nil
			},
		}))
	}
	return ts
}

// Category returns the category: its tools for a turn that binds
// "diagnostics".
func Category(cfg Config) tool.Category {
	return tool.NewCategory(Binding, Tools(cfg)...)
}

// sleep waits ms milliseconds, reporting the milliseconds waited so far
// every interval: "Waited 1200 of 5000 ms".
//
// The tool contract is synchronous (Execute returns the result), so the
// call's goroutine waits here; what the wait holds is kept small, since
// load runs keep thousands of sleeps in flight: one timer, set for the
// next report or for the end, whichever comes first (a ticker and an end
// timer were two timers with their channels, and a wait on three
// channels), and no goroutine of its own (a timer func runs on a
// goroutine started for each firing).
func sleep(ctx context.Context, ms int, every time.Duration) error {
	total := time.Duration(ms) * time.Millisecond
	if every >= total {
		return pause.For(ctx, total)
	}
	start := time.Now()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		waited := time.Since(start)
		if waited >= total {
			return nil
		}
		done := waited.Milliseconds()
		tool.ReportProgress(ctx, done, int64(ms), fmt.Sprintf("Waited %d of %d ms", done, ms))
		t.Reset(min(every, total-time.Since(start)))
	}
}
