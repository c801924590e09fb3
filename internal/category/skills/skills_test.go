package skills_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"
	"github.com/agentbull/toolruntime/internal/tools"

	"github.com/agentbull/toolruntime/internal/category/skills"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, folder, text string
		servers            []string
		body               string
		err                string
	}{
		{name: "minimal", folder: "a", text: "---\nname: a\ndescription: Does a.\n---\nBody.\n", body: "Body.\n"},
		{name: "crlf and bom", folder: "a", text: "\uFEFF---\r\nname: a\r\ndescription: Does a.\r\n---\r\n\r\nBody.\r\n", body: "Body.\n"},
		{name: "servers list", folder: "a", text: "---\nname: a\ndescription: d\nmcp_servers: [b, a, b]\n---\n", servers: []string{"a", "b"}, body: "\n"},
		{name: "servers string", folder: "a", text: "---\nname: a\ndescription: d\nmcp_servers: \"x, y z\"\n---\n", servers: []string{"x", "y", "z"}},
		{name: "metadata list", folder: "a", text: "---\nname: a\ndescription: d\nmetadata:\n  mcp_servers: [m]\n---\n", servers: []string{"m"}},
		{name: "allowed tools", folder: "a", text: "---\nname: a\ndescription: d\nallowed-tools: [\"mcp__gh__list\", \"Read\", \"mcp__lin\"]\n---\n", servers: []string{"gh", "lin"}},
		{name: "dots end front matter", folder: "a", text: "---\nname: a\ndescription: d\n...\nBody", body: "Body\n"},
		{name: "no front matter", folder: "a", text: "# A\n", err: "does not start with front matter"},
		{name: "unclosed", folder: "a", text: "---\nname: a\n", err: "not closed"},
		{name: "bad yaml", folder: "a", text: "---\nname: [a\n---\n", err: "front matter"},
		{name: "no name", folder: "a", text: "---\ndescription: d\n---\n", err: "name is missing"},
		{name: "bad name", folder: "A_b", text: "---\nname: A_b\ndescription: d\n---\n", err: "lower-case"},
		{name: "name not folder", folder: "b", text: "---\nname: a\ndescription: d\n---\n", err: `not the folder's name "b"`},
		{name: "no description", folder: "a", text: "---\nname: a\n---\n", err: "description is missing"},
		{name: "long description", folder: "a", text: "---\nname: a\ndescription: " + strings.Repeat("x", 1025) + "\n---\n", err: "over 1024"},
		{name: "bad server", folder: "a", text: "---\nname: a\ndescription: d\nmcp_servers: [\"a.b\"]\n---\n", err: `mcp server "a.b"`},
		{name: "servers of the wrong type", folder: "a", text: "---\nname: a\ndescription: d\nmcp_servers: {x: 1}\n---\n", err: "want a list"},
		{name: "too large", folder: "a", text: "---\nname: a\ndescription: d\n---\n" + strings.Repeat("x", skills.MaxFileBytes), err: "byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := skills.Parse([]byte(tt.text), tt.folder)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse error = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.MCPServers, tt.servers) {
				t.Errorf("servers %q, want %q", s.MCPServers, tt.servers)
			}
			if tt.body != "" && s.Body != tt.body {
				t.Errorf("body %q, want %q", s.Body, tt.body)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("---\nname: a\ndescription: d\nmcp_servers: [x]\n---\nBody\n"), "a")
	f.Add([]byte("---\r\n...\r\n"), "b")
	f.Fuzz(func(t *testing.T, data []byte, folder string) {
		s, err := skills.Parse(data, folder)
		if err == nil && (s.Name != folder || s.Description == "") {
			t.Fatalf("accepted %q for folder %q", s.Name, folder)
		}
	})
}

func load(t *testing.T) *skills.Library {
	t.Helper()
	lib, err := skills.Load(filepath.Join("testdata", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func TestLoad(t *testing.T) {
	lib := load(t)
	if got := lib.Names(); !slices.Equal(got, []string{"arith", "release-notes", "triage"}) {
		t.Errorf("names %q (hidden folders and folders without SKILL.md are passed over)", got)
	}
	tr, _ := lib.Get("triage")
	if !slices.Equal(tr.MCPServers, []string{"github", "linear", "pager"}) {
		t.Errorf("triage servers %q", tr.MCPServers)
	}
	if got := lib.ServersFor([]string{"arith", "triage", "nope", "release-notes"}); !slices.Equal(got, []string{"calc", "github", "linear", "pager"}) {
		t.Errorf("ServersFor = %q", got)
	}
	var none *skills.Library
	if none.ServersFor([]string{"arith"}) != nil || none.Names() != nil {
		t.Error("a nil library has skills")
	}

	dir := t.TempDir()
	for name, text := range map[string]string{"ok": "---\nname: ok\ndescription: d\n---\n", "bad": "---\nname: other\ndescription: d\n---\n"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name, skills.FileName), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := skills.Load(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "bad", "SKILL.md")) {
		t.Errorf("Load of a broken skill: %v, want an error naming its file", err)
	}
	if _, err := skills.Load(filepath.Join(dir, "missing")); err == nil {
		t.Error("Load of a missing directory succeeded")
	}
}

func assemble(t *testing.T, lib *skills.Library, c protocol.Context) *turn.Set {
	t.Helper()
	set, err := turn.NewAssembler(skills.Category(lib)).Assemble(context.Background(), turn.Env{AgentID: "a1", TurnID: "t1", Context: c})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func TestCategory(t *testing.T) {
	lib := load(t)
	set := assemble(t, lib, protocol.Context{Kind: protocol.KindText, Skills: []string{"triage", "arith", "nope", "arith"}})
	if len(set.Tools()) != 1 || !slices.Equal(set.Notes, []string{`skill "nope" is not available on this worker`}) {
		t.Fatalf("tools %d, notes %q", len(set.Tools()), set.Notes)
	}
	tool := set.Lookup("", skills.ToolName)
	if sp := tool.Spec(); !sp.ReadOnly || sp.DeferLoading || sp.Namespace != "" {
		t.Errorf("read_skill spec %+v", sp)
	}
	catalog, _ := set.Catalog()
	var b bytes.Buffer
	if err := json.Indent(&b, catalog, "", "  "); err != nil {
		t.Fatal(err)
	}
	b.WriteByte('\n')
	golden(t, "catalog.json", b.Bytes())

	// The same skills in another order give the same tool, built once.
	again := assemble(t, lib, protocol.Context{Kind: protocol.KindText, Skills: []string{"arith", "triage"}})
	if again.Lookup("", skills.ToolName) != tool {
		t.Error("read_skill was built again for the same skills")
	}

	inv, err := tools.Prepare(tool, `{"name":"arith"}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := inv.Run(context.Background())
	if err != nil || res.Content != "Use calc.add for every sum. Never add numbers yourself.\n" {
		t.Errorf("read_skill(arith) = %q, %v", res.Content, err)
	}
	if inv.Activity != "Reading the skill arith" {
		t.Errorf("activity %q", inv.Activity)
	}
	// Only the turn's skills can be read.
	if _, err := tools.Prepare(tool, `{"name":"release-notes"}`, 0); err == nil {
		t.Error("read_skill accepted a skill the turn did not enable")
	}

	for _, c := range []protocol.Context{
		{Kind: protocol.KindText},
		{Kind: protocol.KindWorkflowTask, Skills: []string{"arith"}},
	} {
		if set := assemble(t, lib, c); len(set.Tools()) != 0 {
			t.Errorf("context %+v got %d tools", c, len(set.Tools()))
		}
	}
	if set := assemble(t, nil, protocol.Context{Kind: protocol.KindText, Skills: []string{"arith"}}); len(set.Tools()) != 0 || len(set.Notes) != 1 {
		t.Errorf("no library: %d tools, notes %q", len(set.Tools()), set.Notes)
	}
}

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.Bytes
