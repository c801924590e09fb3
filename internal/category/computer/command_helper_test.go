package computer_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/cgroup"
)

// helperEnv makes the package's shared sandbox give each command a
// cgroup of its own, so that a home's commands run in its helper.
const helperEnv = "TOOLRUNTIME_TEST_HELPERS"

// The escape, write, kill and limit tests again, with the commands of a
// home run by its helper (a cgroup per command, the worker's default):
// the test binary runs them with helperEnv set.
func TestEscapesInHelpers(t *testing.T) {
	needSandbox(t)
	if os.Getenv(helperEnv) != "" {
		t.Skip("the inner run")
	}
	m, err := cgroup.Open(cgroup.Options{Root: "auto"})
	if err != nil {
		t.Skipf("SKIPPING: no cgroup subtree here (%v): the escape tests are NOT run through helpers", err)
	}
	_ = m.Close()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^(TestEscapes|TestWritesOutsideTheHome|TestCannotKillTheWorker|TestLimits|TestRunCommand.*|TestTruncatedCommandNeverRuns|TestKernelMountBeforeSandbox)$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestEscapes") || strings.Contains(string(out), "--- SKIP: TestEscapes") {
		t.Fatalf("through helpers: %v\n%s", err, out)
	}
	t.Logf("through helpers:\n%s", out)
}
