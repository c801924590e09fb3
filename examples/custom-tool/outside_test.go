package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// The example builds as a module of its own, outside this one: Go refuses
// an import of another module's internal packages, so this holds the
// example (and the public packages) to what an outside program can use.
func TestBuildsOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example as another module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	goMod := "module example.com/custom\n\ngo 1.26\n\nrequire github.com/agentbull/toolruntime v0.0.0\n\nreplace github.com/agentbull/toolruntime => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": src} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	// The module cache has every dependency (this module built), so no
	// network is needed; -mod=mod completes go.mod's requirements.
	cmd := exec.Command(goTool, "build", "-mod=mod", "-o", filepath.Join(dir, "custom"), ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build outside the module: %v\n%s", err, out)
	}
}
