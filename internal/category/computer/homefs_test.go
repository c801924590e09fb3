package computer_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/workertest"
)

// kernelCategory is a category whose homes are file systems of their
// own, or skips saying why the host does not allow them.
func kernelCategory(t *testing.T, bytes, files int64) *computer.Category {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: per-home file systems (--home-quota-mode kernel) need root or CAP_SYS_ADMIN to loop-mount")
	}
	cfg := computer.Config{Root: fastRoot(t), HomeQuotaBytes: bytes, HomeQuotaFiles: files, QuotaMode: computer.QuotaKernel, Logger: workertest.Logger()}
	if hasBwrap() {
		cfg.Sandbox = sharedSandbox(t)
	}
	c, err := computer.New(cfg)
	if err != nil {
		t.Skipf("SKIPPING: per-home file systems cannot be made on this host: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// With the kernel holding the quota, a writer of 20,000 empty files and
// one of 64 MiB end at the home's bounds exactly (the estimate alone
// ends hundreds of entries past), the neighbour writes throughout, and
// each home sees a file system of its own size.
func TestKernelQuotaHoldsExactly(t *testing.T) {
	needSandbox(t)
	const files = 500
	c := kernelCategory(t, quotaBytes, files)
	home(t, c, agent)
	home(t, c, "a2")
	stop := neighbour(t, c)
	_, _ = run(t, c, computer.RunCommandName, map[string]any{"command": `mkdir d; i=0; while [ $i -lt 20000 ]; do : > d/f$i || exit 1; i=$((i+1)); done`, "timeout_seconds": 60})
	u, _ := c.Usage(agent)
	t.Logf("after 20,000 empty files: %d entries (bound %d)", u.Files, files)
	if u.Files > files+16 {
		t.Errorf("the home holds %d entries, want at most %d (the image's inodes)", u.Files, files+16)
	}
	_, _ = run(t, c, computer.RunCommandName, map[string]any{"command": `rm -rf d; i=0; while [ $i -lt 64 ]; do head -c 1048576 /dev/zero > f$i || exit 1; i=$((i+1)); done`, "timeout_seconds": 60})
	u, _ = c.Usage(agent)
	t.Logf("after 64 files of 1 MiB: %d KiB (quota %d KiB)", u.Bytes>>10, quotaBytes>>10)
	if u.Bytes > quotaBytes {
		t.Errorf("the home holds %d KiB, want at most its %d KiB", u.Bytes>>10, quotaBytes>>10)
	}
	res, err := runCtx(t, context.Background(), c, "a2", computer.RunCommandName, map[string]any{"command": "df -k . | tail -1"})
	if err != nil {
		t.Fatal(err)
	}
	if f := strings.Fields(res.Content); len(f) < 2 || atoi(f[1]) <= 0 || atoi(f[1]) > quotaBytes>>10 {
		t.Errorf("the neighbour's home is not a file system of its own size: %s", res.Content)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(c.Root(), agent+".img")); err != nil {
		t.Errorf("no image beside the home: %v", err)
	}
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
