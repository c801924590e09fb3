package tools_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/tools"
)

func TestClip(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly", 7, "exactly"},
		{"a longer title", 8, "a longe…"},
		{"日本語のタイトル", 4, "日本語…"},
	} {
		if got := tools.Clip(c.s, c.n); got != c.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
	if tools.Plural(1) != "" || tools.Plural(0) != "s" || tools.Plural(2) != "s" {
		t.Error("Plural")
	}
}
