package internal_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// floors are the module's layers, lowest first: a package imports only
// packages on floors below its own. docs/architecture.md shows them.
var floors = [][]string{
	{"internal/textclip", "internal/pause", "internal/traceheader", "internal/mountinfo", "internal/heaptest"},
	{"protocol", "internal/schema", "internal/netguard", "internal/procguard", "internal/natstest", "internal/golden", "internal/cgroup", "internal/natsconn", "internal/tokenvault", "internal/repull"},
	{"internal/toolhooks", "internal/mcpdoor/principal"},
	{"tool", "internal/wire"},
	{"internal/tools", "internal/sandbox", "internal/media"},
	{"internal/spans"},
	{"internal/turn", "internal/bus"},
	{"internal/fairshare", "internal/turnstate", "internal/catalog", "internal/telemetry", "tool/tooltest"},
	{"internal/category/", "internal/workflowtask", "internal/mcpdoor/conformance"},
	{"internal/engine"},
	{"internal/workertest", "internal/chaos", "worker", "gateway"},
	{"internal/console", "mcpdoor"},
	{"cmd/", "examples/", "bench/", "deployments", "internal/mcpdoor/conformance/fixtureworker"},
}

const module = "github.com/agentbull/toolruntime/"

// floorOf is the floor of a package path relative to the module; a
// prefix ending in "/" holds every package beneath it.
func floorOf(rel string) int {
	best, bestLen := -1, -1
	for i, f := range floors {
		for _, p := range f {
			match := rel == p || strings.HasSuffix(p, "/") && strings.HasPrefix(rel, p) ||
				strings.HasPrefix(rel, p+"/") && !strings.HasSuffix(p, "/")
			if match && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best
}

// TestFloors fails when a package imports one on its own floor or above
// it, or when a new package is on no floor.
func TestFloors(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "github.com/agentbull/toolruntime/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok || rel == "internal" {
			continue
		}
		n++
		own := floorOf(rel)
		if own < 0 {
			t.Errorf("%s is on no floor: add it to floors (and to docs/architecture.md)", rel)
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if f := floorOf(dep); f >= own {
				t.Errorf("%s (floor %d) imports %s (floor %d): a package imports only floors below its own", rel, own, dep, f)
			}
		}
	}
	if n < 20 {
		t.Fatalf("go list found only %d packages", n)
	}
}
