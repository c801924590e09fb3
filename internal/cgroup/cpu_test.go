package cgroup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// SetCPU holds a group to a share of a core over a short period, below a
// tenth over a longer one, and 0 gives back what New set.
func TestSetCPU(t *testing.T) {
	m, err := Open(Options{Root: "auto"})
	if err != nil {
		t.Skipf("SKIPPING: no cgroup subtree here (%v): SetCPU is NOT tested", err)
	}
	defer m.Close()
	if !contains(m.Controllers(), "cpu") {
		t.Skip("SKIPPING: no cpu controller: SetCPU is NOT tested")
	}
	g, err := m.New(Limits{MemoryBytes: 64 << 20, Pids: 32, CPU: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	read := func() string {
		if m.v2 {
			b, _ := os.ReadFile(filepath.Join(g.dirs[0], "cpu.max"))
			return strings.TrimSpace(string(b))
		}
		for i, c := range m.controllers {
			if c == "cpu" {
				q, _ := os.ReadFile(filepath.Join(g.dirs[i], "cpu.cfs_quota_us"))
				p, _ := os.ReadFile(filepath.Join(g.dirs[i], "cpu.cfs_period_us"))
				return strings.TrimSpace(string(q)) + " " + strings.TrimSpace(string(p))
			}
		}
		return ""
	}
	for _, tt := range []struct {
		cores float64
		want  string
	}{
		{0.1, "1000 10000"},
		{0.5, "5000 10000"},
		{0.02, "1000 50000"},
		{0, "5000 10000"}, // New's half a core, over the short period
	} {
		if err := g.SetCPU(tt.cores); err != nil {
			t.Fatalf("SetCPU(%v): %v", tt.cores, err)
		}
		if got := read(); got != tt.want {
			t.Errorf("SetCPU(%v): %q, want %q", tt.cores, got, tt.want)
		}
	}
	if err := (*Group)(nil).SetCPU(0.1); err != ErrNoCPU {
		t.Errorf("a nil group's SetCPU: %v, want ErrNoCPU", err)
	}
}
