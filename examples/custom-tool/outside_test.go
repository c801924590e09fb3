package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// The example builds as a module of its own, outside this one: Go refuses
// an import of another module's internal packages, so this holds the
// example (and the public packages) to what an outside program can use.
func TestBuildsOutsideTheModule(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
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
// this one (by a replace directive) and returns its directory. Its go.mod
// has every requirement of this module's go.mod, at the same versions, so
// its module graph is this module's graph: building it needs no go.mod
// file that building this module did not (without them, -mod=mod would
// add requirements whose own go.mod files name old versions, such as
// go-logr/logr v1.2.2, that nothing else downloads).
func outsideModule(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = string(data)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goOutside(t, dir, "mod", "edit", "-module="+name,
		"-require=github.com/agentbull/toolruntime@v0.0.0",
		"-replace=github.com/agentbull/toolruntime="+root)
	return dir
}

// goOutside runs the go command in dir, a module outside this one. It
// downloads what the module cache lacks with the machine's GOPROXY (a
// fresh machine's cache holds only what this module's build needed); when
// no proxy can be reached the test is skipped, saying so.
func goOutside(t *testing.T, dir string, args ...string) {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if args[0] != "mod" {
		// -mod=mod: go.mod may gain the "// indirect" marks it lacks.
		args = append(args[:1:1], append([]string{"-mod=mod"}, args[1:]...)...)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	if m := noProxy.Find(out); m != nil {
		t.Skipf("go %v outside the module needs a module download, and no module proxy is reachable (GOPROXY=%s): %s\n%s",
			args, goEnv(t, "GOPROXY"), m, out)
	}
	t.Fatalf("go %v outside the module: %v\n%s", args, err, out)
}

// noProxy matches the go command's words for a download that could not
// reach a proxy (or was not allowed to try).
var noProxy = regexp.MustCompile(`module lookup disabled by GOPROXY=off|dial tcp[^\n]*|no such host|connection refused|network is unreachable|i/o timeout|TLS handshake timeout`)

func goEnv(t *testing.T, name string) string {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "env", name).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}
