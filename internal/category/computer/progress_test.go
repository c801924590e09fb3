package computer_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/tools"
)

// run_command reports the bytes of output so far after each write, as
// "<size> of output" with no total; the last report is the whole count.
func TestRunCommandReportsOutputBytes(t *testing.T) {
	needSandbox(t)
	c := newCategory(t, computer.Config{})
	type report struct {
		done, total int64
		label       string
	}
	var mu sync.Mutex
	var reports []report
	ctx := tools.WithProgress(context.Background(), func(done, total int64, label string) {
		mu.Lock()
		defer mu.Unlock()
		reports = append(reports, report{done, total, label})
	})
	res, err := runCtx(t, ctx, c, agent, computer.RunCommandName,
		map[string]any{"command": "for i in 1 2 3; do head -c 50000 /dev/zero; sleep 0.01; done; echo"})
	if err != nil {
		t.Fatal(err)
	}
	d := details(t, res)
	mu.Lock()
	defer mu.Unlock()
	if len(reports) < 3 {
		t.Fatalf("%d reports, want one per write at least: %+v", len(reports), reports)
	}
	var prev int64
	for _, r := range reports {
		if r.done <= prev || r.total != 0 {
			t.Fatalf("report %+v after %d", r, prev)
		}
		prev = r.done
	}
	last := reports[len(reports)-1]
	if last.done != d.OutputBytes || last.done != 150001 {
		t.Fatalf("last report %+v, output %d bytes", last, d.OutputBytes)
	}
	if last.label != "146.5 KiB of output" {
		t.Fatalf("label %q", last.label)
	}
}
