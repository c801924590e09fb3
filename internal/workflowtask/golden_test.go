package workflowtask_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentbull/toolruntime/internal/workflowtask"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got (JSON) with testdata/name, indented for reading.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, got, "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended):\n%s", name, b.Bytes())
	}
}

// TestGoldenTaskCatalog pins the task catalog a gateway receives over
// turn.tools, and submit_result's definition for a strict-ready schema
// and for one the strict rewrite changes.
func TestGoldenTaskCatalog(t *testing.T) {
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
