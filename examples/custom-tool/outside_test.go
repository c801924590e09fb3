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
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	dir := outsideModule(t, "example.com/custom", map[string]string{"main.go": string(src)})
	goOutside(t, dir, "build", "-o", filepath.Join(dir, "custom"), ".")
}

// outsideModule writes files into a new module named name that requires
// this one (by a replace directive) and nothing else, and returns its
// directory.
func outsideModule(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	files["go.mod"] = "module " + name + "\n\ngo 1.26\n\nrequire github.com/agentbull/toolruntime v0.0.0\n\nreplace github.com/agentbull/toolruntime => " + root + "\n"
	files["go.sum"] = string(sum)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goOutside runs the go command in dir, a module outside this one.
func goOutside(t *testing.T, dir string, args ...string) {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	// The module cache has every dependency (this module built), so no
	// network is needed; -mod=mod completes go.mod's requirements.
	cmd := exec.Command(goTool, append(args[:1:1], append([]string{"-mod=mod"}, args[1:]...)...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v outside the module: %v\n%s", args, err, out)
	}
}
