package mcp_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/category/mcp"
)

// A configuration file is read with its oauth objects strictly: no input
// panics, and what parses validates.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"servers":{"gh":{"url":"https://x.example/mcp","oauth":{"owner":"agent","client_id":"a","scopes":["repo"]}}}}`))
	f.Add([]byte(`{"servers":{"m":{"url":"http://10.0.0.1/mcp","oauth":{"grant":"client_credentials","client_id":"a","client_secret":"b","allow_private":true,"timeout":"2s"}}}}`))
	f.Add([]byte(`{"servers":{"s":{"command":"x","oauth":{}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := mcp.ParseConfig(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed but does not validate: %v", err)
		}
	})
}

func TestOAuthConfigChecks(t *testing.T) {
	for _, bad := range []string{
		`{"servers":{"s":{"command":"x","oauth":{}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"grant":"password"}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"owner":"everyone"}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"grant":"client_credentials","client_id":"a"}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"client_metadata_url":"http://x/c.json"}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"client_secret":"b"}}}}`,
		`{"servers":{"s":{"url":"https://x/mcp","oauth":{"clientid":"a"}}}}`,
	} {
		if _, err := mcp.ParseConfig([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	cfg, err := mcp.ParseConfig([]byte(`{"servers":{"s":{"url":"https://x/mcp","oauth":{"client_id":"a"}}}}`))
	if err != nil || !cfg.HasOAuth() {
		t.Fatalf("%v, HasOAuth %v", err, cfg.HasOAuth())
	}
	if got := mcp.OwnerFor(cfg.Servers["s"].OAuth, "a1", ""); got != "fair:a1" {
		t.Fatalf("owner %q", got)
	}
	if got := mcp.OwnerFor(cfg.Servers["s"].OAuth, "a1", "tenant"); got != "fair:tenant" {
		t.Fatalf("owner %q", got)
	}
}
