package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/agentbull/toolruntime/internal/workertest"
)

// The example builds as a module of its own, outside this one: Go refuses
// an import of another module's internal packages, so this holds the
// example (and the public packages) to what an outside program can use.
func TestBuildsOutsideTheModule(t *testing.T) {
	t.Parallel() // its go commands run beside the other tests'
	if testing.Short() {
		t.Skip("builds the example as another module")
	}
	if exampleBinary(t) == "" {
		t.Skip("no module proxy is reachable: " + example.skip)
	}
}

// example is the example's program built once, as a module outside this
// one: TestBuildsOutsideTheModule checks that it builds and TestProgram
// runs it (one link of the worker, not two). TestMain removes its dir.
var example struct {
	once      sync.Once
	dir, bin  string
	skip      string // why it could not be built (no proxy); bin is ""
	args      []string
	out       []byte
	err       error
	setupFail error
}

// exampleBinary builds the example outside the module once and returns
// its path, or "" when no module proxy could be reached for what the
// build needs (example.skip says why). Any other failure fails t.
func exampleBinary(t *testing.T) string {
	t.Helper()
	example.once.Do(func() {
		src, err := os.ReadFile("main.go")
		if err != nil {
			example.setupFail = err
			return
		}
		if example.dir, err = os.MkdirTemp("", "custom-tool-outside-"); err != nil {
			example.setupFail = err
			return
		}
		if err := writeOutsideModule(example.dir, "example.com/custom", map[string]string{"main.go": string(src)}); err != nil {
			example.setupFail = err
			return
		}
		bin := filepath.Join(example.dir, "custom")
		example.args = []string{"build", "-o", bin, "."}
		example.out, example.err = runGo(example.dir, example.args...)
		if example.err == nil {
			example.bin = bin
		} else if m := noProxy.Find(example.out); m != nil {
			example.skip = string(m)
		}
	})
	if example.setupFail != nil {
		t.Fatal(example.setupFail)
	}
	if example.err != nil && example.skip == "" {
		t.Fatalf("go %v outside the module: %v\n%s", example.args, example.err, example.out)
	}
	return example.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if example.dir != "" {
		_ = os.RemoveAll(example.dir)
	}
	os.Exit(code)
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
	dir := t.TempDir()
	if err := writeOutsideModule(dir, name, files); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeOutsideModule is outsideModule in dir, for a caller without a t.
func writeOutsideModule(dir, name string, files map[string]string) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		files[f] = string(data)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	args := []string{"mod", "edit", "-module=" + name,
		"-require=github.com/agentbull/toolruntime@v0.0.0",
		"-replace=github.com/agentbull/toolruntime=" + root}
	if out, err := runGo(dir, args...); err != nil {
		return fmt.Errorf("go %v outside the module: %v\n%s", args, err, out)
	}
	return nil
}

// goOutside runs the go command in dir, a module outside this one. It
// downloads what the module cache lacks with the machine's GOPROXY (a
// fresh machine's cache holds only what this module's build needed); when
// no proxy can be reached the test is skipped, saying so.
func goOutside(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := runGo(dir, args...)
	if err == nil {
		return
	}
	if m := noProxy.Find(out); m != nil {
		t.Skipf("go %v outside the module needs a module download, and no module proxy is reachable (GOPROXY=%s): %s\n%s",
			args, goEnv(t, "GOPROXY"), m, out)
	}
	t.Fatalf("go %v outside the module: %v\n%s", args, err, out)
}

// runGo runs the go command in dir, outside this module, and returns
// what it wrote.
func runGo(dir string, args ...string) ([]byte, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if args[0] != "mod" {
		// -mod=mod: go.mod may gain the "// indirect" marks it lacks.
		// -race under the race detector (workertest.BuildFlags): what
		// ./... compiled for its tests is then in the build cache; without
		// it, on a fresh machine, these commands compile the whole module
		// graph once more, a large part of the suite's time.
		flags := append([]string{"-mod=mod"}, workertest.BuildFlags()...)
		args = append(args[:1:1], append(flags, args[1:]...)...)
	}
	cmd := exec.Command(goTool, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	return cmd.CombinedOutput()
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
