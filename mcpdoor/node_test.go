package mcpdoor_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// conformanceDir is where scripts/test-deps.sh installs Node 22 and the
// npm clients ($MCP_CONFORMANCE_DIR, by default under the user's cache).
func conformanceDir() string {
	if dir := os.Getenv("MCP_CONFORMANCE_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "toolruntime", "mcp-conformance")
}

// nodeDeps finds Node 22 and an npm package under prefix (a directory of
// conformanceDir): the test skips without them, saying so, unless
// MCP_CONFORMANCE_REQUIRED=1 (CI), where it fails.
func nodeDeps(t *testing.T, prefix, pkg string) (node, dir string) {
	t.Helper()
	base := conformanceDir()
	node = filepath.Join(base, "bin", "node")
	dir = filepath.Join(base, prefix)
	missing := ""
	if out, err := exec.Command(node, "-p", "process.versions.node.split('.')[0]").Output(); err != nil || strings.TrimSpace(string(out)) != "22" {
		missing = fmt.Sprintf("Node 22 at %s (%v, %q)", node, err, out)
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg, "package.json")); err != nil {
		missing = pkg + " in " + dir
	}
	if missing != "" {
		msg := "no " + missing + ": run scripts/test-deps.sh"
		if os.Getenv("MCP_CONFORMANCE_REQUIRED") == "1" {
			t.Fatal(msg + " (MCP_CONFORMANCE_REQUIRED=1)")
		}
		t.Skip(msg)
	}
	return node, dir
}
