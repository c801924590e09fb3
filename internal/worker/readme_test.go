package worker_test

import (
	"os"
	"strings"
	"testing"
)

// TestREADMECommandsAreSmokeTested keeps the README honest: every NATS CLI
// command it shows is run, verbatim, by scripts/cli-smoke.sh in CI.
func TestREADMECommandsAreSmokeTested(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile("../../scripts/cli-smoke.sh")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(readme)) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "nats ") {
			continue
		}
		n++
		if !strings.Contains(string(script), line) {
			t.Errorf("README command not run by scripts/cli-smoke.sh:\n%s", line)
		}
	}
	if n < 10 {
		t.Errorf("found only %d nats commands in the README", n)
	}
}
