package gateway_test

import (
	"os/exec"
	"strings"
	"testing"
)

// maxGatewayModules is how many modules besides this one a program that
// imports gateway may link: nats.go with OTel's propagation needs 9.
const maxGatewayModules = 12

// The gateway client stays light: none of the worker (no internal
// package, so no nats-server, image or JSON Schema library) and at most
// maxGatewayModules modules.
func TestGatewayDependencies(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{with .Module}}{{.Path}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/agentbull/toolruntime"
	mods := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		pkg, mod, _ := strings.Cut(strings.TrimSpace(line), " ")
		if strings.HasPrefix(pkg, module+"/internal/") {
			t.Errorf("gateway links %s, a package of the worker", pkg)
		}
		if mod != "" && mod != module {
			mods[mod] = true
		}
	}
	if len(mods) > maxGatewayModules {
		t.Errorf("gateway links %d modules besides this one, over %d: %v", len(mods), maxGatewayModules, mods)
	}
	if len(mods) == 0 {
		t.Fatal("go list found no modules: the test does not test")
	}
}
