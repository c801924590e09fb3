package mcp_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

// The --mcp-config example of docs/operations.md is a configuration the
// worker takes, with the servers the text around it describes.
func TestOperationsDocConfig(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```json\n(\\{\"servers\".*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no json block of an MCP configuration")
	}
	cfg, err := mcp.ParseConfig(m[1])
	if err != nil {
		t.Fatalf("the configuration of docs/operations.md: %v\n%s", err, m[1])
	}
	var names []string
	for name := range cfg.Servers {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"files", "github"}) {
		t.Errorf("servers %v", names)
	}
}
