package mcp_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

func TestConfigApprovalNames(t *testing.T) {
	cfg, err := mcp.ParseConfig([]byte(`{"servers": {
		"github": {"url": "https://mcp.example.com/mcp", "tools": {"delete_issue": {"approval": true}, "close_issue": {"approval": true}, "list_issues": {}}},
		"files":  {"command": "mcp-server-filesystem", "approval": true, "tools": {"read": {"approval": false}}},
		"quiet":  {"command": "q"}
	}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.ApprovalNames(), []string{"files.*", "github.close_issue", "github.delete_issue"}; !slices.Equal(got, want) {
		t.Errorf("approval names %v, want %v", got, want)
	}
	if _, err := mcp.ParseConfig([]byte(`{"servers": {"x": {"command": "q", "approval": "yes"}}}`)); err == nil || !strings.Contains(err.Error(), "approval") {
		t.Errorf("a non-boolean approval: %v", err)
	}
}

func TestConfigHasStdio(t *testing.T) {
	http := mcp.Config{Servers: map[string]mcp.ServerConfig{"a": {URL: "http://127.0.0.1:1/mcp"}}}
	if http.HasStdio() {
		t.Error("a config of URLs has a stdio server")
	}
	http.Servers["b"] = mcp.ServerConfig{Command: "true"}
	if !http.HasStdio() {
		t.Error("a command is not a stdio server")
	}
}
