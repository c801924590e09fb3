package sandbox_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/cgroup"
	"github.com/agentbull/toolruntime/internal/sandbox"
)

// BenchmarkTrue is the sandbox's cost per command: `true` run by the
// shell in a sandbox, against the same shell run directly. It reports
// the median and the 99th percentile of the wall time of one command,
// and the median CPU time (user and system) the command and everything
// it started used: on a loaded machine the wall time measures the load,
// the CPU time the sandbox.
func BenchmarkTrue(b *testing.B) {
	report := func(b *testing.B, d, cpu []time.Duration) {
		slices.Sort(d)
		slices.Sort(cpu)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
		if len(cpu) > 0 { // a helper's command is not the worker's child
			b.ReportMetric(float64(cpu[len(cpu)/2].Microseconds())/1000, "cpu-p50-ms")
		}
	}
	cpuOf := func(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }
	sandboxed := func(b *testing.B, cfg sandbox.Config) {
		s := newSandbox(b, cfg)
		h := homeDir(b, s)
		var d, cpu []time.Duration
		for b.Loop() {
			start := time.Now()
			r, err := s.Start(context.Background(), sandbox.Spec{Home: h, Shell: "/bin/sh", Command: "true", Env: []string{"PATH=/usr/bin:/bin"}}, io.Discard, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				b.Fatal(err)
			}
			if _, err := r.End(); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
			if r.Cmd != nil {
				cpu = append(cpu, cpuOf(r.Cmd.ProcessState))
			}
		}
		report(b, d, cpu)
	}
	b.Run("sandbox", func(b *testing.B) { sandboxed(b, sandbox.Config{}) })
	// With a cgroup of its own per command (made, joined, killed and
	// removed each time), where the test's own cgroup can hold them.
	b.Run("cgroup", func(b *testing.B) {
		m, err := cgroup.Open(cgroup.Options{Root: "auto"})
		if err != nil {
			b.Skipf("SKIPPING: no cgroup subtree: %v", err)
		}
		defer m.Close()
		sandboxed(b, sandbox.Config{Cgroups: m})
	})
	b.Run("none", func(b *testing.B) {
		var d, cpu []time.Duration
		for b.Loop() {
			start := time.Now()
			cmd := exec.Command("/bin/sh", "-c", "true")
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			d = append(d, time.Since(start))
			cpu = append(cpu, cpuOf(cmd.ProcessState))
		}
		report(b, d, cpu)
	})
}

// BenchmarkStartOver is the sandbox's start over an unconfined command
// (the target: at most 5 ms at the median), measured in pairs: each
// iteration runs `true` in a sandbox and then the same shell directly,
// so that both see the same load. It reports the medians of both, the
// median of the pairs' differences (over-p50-ms) and the ratio of the
// medians. Between two pairs it waits (untimed, up to 1 s) for the
// home's spare, as the model's turn between two commands of an agent
// lets it be made: the sandbox then costs a command the start of its
// shell. The cold cases make no spares (Config.Spares -1): each
// command waits for its sandbox's making, as the first of a home does.
func BenchmarkStartOver(b *testing.B) {
	pairs := func(b *testing.B, cfg sandbox.Config) {
		s := newSandbox(b, cfg)
		h := homeDir(b, s)
		spec := sandbox.Spec{Home: h, Shell: "/bin/sh", Command: "true", Env: []string{"PATH=/usr/bin:/bin"}}
		var sb, none, over []time.Duration
		for b.Loop() {
			start := time.Now()
			r, err := s.Start(context.Background(), spec, io.Discard, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				b.Fatal(err)
			}
			if _, err := r.End(); err != nil {
				b.Fatal(err)
			}
			d := time.Since(start)
			start = time.Now()
			cmd := exec.Command("/bin/sh", "-c", "true")
			cmd.Dir = h
			if err := cmd.Run(); err != nil {
				b.Fatal(err)
			}
			u := time.Since(start)
			sb, none, over = append(sb, d), append(none, u), append(over, d-u)
			if cfg.Spares >= 0 && (cfg.Cgroups == nil || cfg.OneShot) {
				b.StopTimer()
				s.WaitSpare(spec, time.Second)
				b.StartTimer()
			}
		}
		med := func(d []time.Duration) float64 {
			slices.Sort(d)
			return float64(d[len(d)/2].Microseconds()) / 1000
		}
		s50, n50 := med(sb), med(none)
		b.ReportMetric(s50, "sandbox-p50-ms")
		b.ReportMetric(n50, "none-p50-ms")
		b.ReportMetric(med(over), "over-p50-ms")
		b.ReportMetric(s50/n50, "ratio")
	}
	cgroups := func(b *testing.B, spares int, oneShot bool) {
		m, err := cgroup.Open(cgroup.Options{Root: "auto"})
		if err != nil {
			b.Skipf("SKIPPING: no cgroup subtree: %v", err)
		}
		defer m.Close()
		pairs(b, sandbox.Config{Cgroups: m, Spares: spares, OneShot: oneShot})
	}
	b.Run("sandbox", func(b *testing.B) { pairs(b, sandbox.Config{}) })
	// With cgroups a home's commands run in its helper (helper.go).
	b.Run("cgroup", func(b *testing.B) { cgroups(b, 0, false) })
	b.Run("cgroup-spare", func(b *testing.B) { cgroups(b, 0, true) })
	b.Run("sandbox-cold", func(b *testing.B) { pairs(b, sandbox.Config{Spares: -1}) })
	b.Run("cgroup-cold", func(b *testing.B) { cgroups(b, -1, true) })
}
