package tools_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/tools"
)

func TestPlural(t *testing.T) {
	if tools.Plural(1) != "" || tools.Plural(0) != "s" || tools.Plural(2) != "s" {
		t.Error("Plural")
	}
}
