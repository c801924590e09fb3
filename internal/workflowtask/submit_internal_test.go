package workflowtask

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
	"github.com/agentbull/toolruntime/internal/tools"
)

// A result with 60,000 wrong items is rejected with the first violations
// and a count, not a list that would not fit one event.
func TestViolationsTextIsCapped(t *testing.T) {
	t.Parallel()
	ve := &schema.ValidationError{}
	for i := range 60000 {
		ve.Violations = append(ve.Violations, schema.Violation{Pointer: fmt.Sprintf("/result/items/%d", i), Message: "expected object, but got number"})
	}
	text := violationsText(ve)
	want := fmt.Sprintf("and %d more violations", 60000-tools.MaxViolations)
	if !strings.Contains(text, want) || !strings.Contains(text, "/result/items/0:") || strings.Contains(text, fmt.Sprintf("/result/items/%d:", tools.MaxViolations)) {
		t.Errorf("violations not capped with %q:\n%.2000s", want, text)
	}
	if len(text) > 32<<10 {
		t.Errorf("%d bytes for %d listed violations", len(text), tools.MaxViolations)
	}
}
