package bus

import "testing"

// Span names carry subject templates: few names, whatever the ids.
func TestSubjectTemplate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"turn.call.output.a1.t1": "turn.call.output.{agent_id}.{turn_id}",
		"turn.dead.a1.t1":        "turn.dead.{agent_id}.{turn_id}",
		"workflow.event.wf-1":    "workflow.event.{workflow_id}",
		"jobs.events":            "jobs.events",
	} {
		if got := subjectTemplate(in); got != want {
			t.Errorf("subjectTemplate(%q) = %q, want %q", in, got, want)
		}
	}
}
