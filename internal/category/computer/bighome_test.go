package computer_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/category/computer"
)

// What a home of many files (a node_modules: 41,600 files of 700 bytes in
// 1,600 directories) costs its commands: the untar that makes it, then
// `true` nine times, in the kernel mode and the estimate (with a cgroup
// per command where the host has one), on a tmpfs of 2 GiB. It asserts
// nothing (no wall time is asserted); TOOLRUNTIME_QUOTA_MEASURE=1 runs it.
func TestBigHomeCommandCost(t *testing.T) {
	needSandbox(t)
	if os.Getenv("TOOLRUNTIME_QUOTA_MEASURE") == "" {
		t.Skip("a measurement: TOOLRUNTIME_QUOTA_MEASURE=1 runs it")
	}
	src := t.TempDir()
	for d := range 1600 {
		dir := filepath.Join(src, "nm", fmt.Sprintf("m%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 25 {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.js", f)), make([]byte, 700), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	tarball := filepath.Join(t.TempDir(), "nm.tar")
	if out, err := exec.Command("tar", "-cf", tarball, "-C", src, "nm").CombinedOutput(); err != nil {
		t.Fatal(err, string(out))
	}
	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=2g,mode=0700"); err != nil {
		t.Skipf("SKIPPING: no tmpfs of 2 GiB here (%v)", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	cfg := computer.Config{Root: filepath.Join(root, "homes"), QuotaMode: computer.QuotaEstimate, HomeQuotaFiles: 200_000}
	if sb, _ := pacingSandbox(t); sb != nil {
		cfg.Sandbox = sb
	}
	t.Logf("the estimate with a cgroup per command: %v", cfg.Sandbox != nil)
	modes := []string{"kernel", "estimate"}
	cats := map[string]*computer.Category{"kernel": kernelCategory(t, 1<<30, 200_000, filepath.Join(root, "kernel")), "estimate": newCategory(t, cfg)}
	for _, m := range modes {
		h := home(t, cats[m], agent)
		if out, err := exec.Command("cp", tarball, filepath.Join(h, "nm.tar")).CombinedOutput(); err != nil {
			t.Fatal(err, string(out))
		}
		began := time.Now()
		if res, err := run(t, cats[m], computer.RunCommandName, map[string]any{"command": "tar -xf nm.tar && rm nm.tar", "timeout_seconds": 300}); err != nil {
			t.Fatal(m, err, res.Content)
		}
		t.Logf("%s: the untar of 41,600 files took %.2f s", m, time.Since(began).Seconds())
	}
	times := map[string][]time.Duration{}
	for range 9 {
		for _, m := range modes {
			began := time.Now()
			if res, err := run(t, cats[m], computer.RunCommandName, map[string]any{"command": "true"}); err != nil {
				t.Fatal(m, err, res.Content)
			}
			times[m] = append(times[m], time.Since(began))
		}
	}
	for _, m := range modes {
		d := times[m]
		slices.Sort(d)
		t.Logf("%s: `true` in that home, median of 9 %v (%v to %v)", m, d[4].Round(time.Millisecond), d[0].Round(time.Millisecond), d[8].Round(time.Millisecond))
	}
}
