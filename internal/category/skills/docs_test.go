package skills_test

import (
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/skills"
)

// The SKILL.md of docs/operations.md is a skill the worker loads, needing
// the MCP server the text says.
func TestOperationsDocSkill(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```markdown\n(---\n.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/operations.md has no markdown block of a SKILL.md")
	}
	s, err := skills.Parse(m[1], "release-notes")
	if err != nil {
		t.Fatalf("the SKILL.md of docs/operations.md: %v\n%s", err, m[1])
	}
	if s.Name != "release-notes" || !slices.Equal(s.MCPServers, []string{"github"}) {
		t.Errorf("name %q, MCP servers %v", s.Name, s.MCPServers)
	}
}
