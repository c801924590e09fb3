package workflowtask_test

import (
	"encoding/json"
	"os"
	"testing"

	goldenfile "github.com/agentbull/toolruntime/internal/golden"

	"github.com/agentbull/toolruntime/internal/workflowtask"
)

// golden compares got with testdata/name (see internal/golden).
var golden = goldenfile.IndentedJSON

// TestGoldenTaskCatalog pins the task catalog a gateway receives over
// turn.tools, and submit_result's definition for a strict-ready schema
// and for one the strict rewrite changes.
func TestGoldenTaskCatalog(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.startWorker()
	loose := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"tags":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"}}}}},"required":["title"]}`)
	wf, turns := h.startWorkflow(0,
		taskSpec{ID: "answer", Instructions: "Answer.", ResultSchema: answerSchema},
		taskSpec{ID: "loose", Instructions: "Describe.", ResultSchema: loose},
	)

	all, _ := h.catalog(turns["answer"], taskContext(wf, "answer", "web", "brain", "computer", "diagnostics"))
	golden(t, "task_catalog.json", all.Tools)

	var defs []json.RawMessage
	for _, id := range []string{"answer", "loose"} {
		reply, _ := h.catalog(turns[id], taskContext(wf, id))
		var entries []json.RawMessage
		if err := json.Unmarshal(reply.Tools, &entries); err != nil || len(entries) != 1 {
			t.Fatalf("%s: catalog %s", id, reply.Tools)
		}
		defs = append(defs, entries[0])
	}
	golden(t, "submit_result.json", mustJSON(defs))
}

func ExampleSubmitParameters() {
	params, _ := workflowtask.SubmitParameters(json.RawMessage(`{ "type": "string" }`))
	os.Stdout.Write(params)
	// Output: {"type":"object","properties":{"result":{"type":"string"}},"required":["result"],"additionalProperties":false}
}
