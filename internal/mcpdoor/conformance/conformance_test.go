package conformance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/mcpdoor/conformance"
	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/tool/tooltest"
)

func byName(t *testing.T) map[string]*tool.Tool {
	t.Helper()
	m := map[string]*tool.Tool{}
	for _, tl := range conformance.Tools() {
		m[tl.Name()] = tl
	}
	return m
}

func TestFixtureOutputs(t *testing.T) {
	tools := byName(t)
	ctx := context.Background()
	for _, c := range []struct{ name, args, want string }{
		{"test_simple_text", `{}`, conformance.SimpleText},
		{"greet", `{"name":"Ada"}`, "Hello, Ada!"},
		{"slow_compute", `{"seconds":0,"label":"instant"}`, `Computed "instant" in 0 s.`},
		{"test_custom_headers", `{"region":"us-west1"}`, "region: us-west1"},
		{"confirm_delete", `{"path":"/tmp/x"}`, "Deleted /tmp/x"},
		{"confirm_delete", `{"filename":"y.txt"}`, "Deleted y.txt"},
		{conformance.HeldElicitation, `{}`, "Approved, and run."},
		{conformance.HeldTamperedState, `{}`, "Approved, and run."},
	} {
		out := tooltest.Check(ctx, tools[c.name], c.args)
		if out.Err != nil || out.Output != c.want {
			t.Errorf("%s: %q (%v), want %q", c.name, out.Output, out.Err, c.want)
		}
	}
	out := tooltest.Check(ctx, tools["test_error_handling"], `{}`)
	if out.Err == nil || out.Err.Kind != tool.ToolError || !strings.Contains(out.Output, conformance.ErrorText) {
		t.Errorf("test_error_handling: %q (%v)", out.Output, out.Err)
	}
	out = tooltest.Check(ctx, tools["failing_job"], `{}`)
	if out.Err == nil || out.Err.Kind != tool.ToolError || !strings.Contains(out.Output, conformance.FailingJobText) {
		t.Errorf("failing_job: %q (%v)", out.Output, out.Err)
	}
	out = tooltest.Check(ctx, tools["protocol_error_job"], `{}`)
	if out.Err == nil || out.Err.Kind != tool.Internal {
		t.Errorf("protocol_error_job: %q (%v)", out.Output, out.Err)
	}
	out = tooltest.Check(ctx, tools["slow_compute"], `{"seconds":601}`)
	if out.Err == nil || out.Err.Kind != tool.InvalidArguments {
		t.Errorf("slow_compute 601 s: %q (%v)", out.Output, out.Err)
	}
}

// The media fixtures reach the worker's output as an image and files: the
// PNG and the PDF are what the worker's media checks take (it recognises
// formats from their bytes, and drops what it cannot read).
func TestFixtureMedia(t *testing.T) {
	tools := byName(t)
	ctx := context.Background()
	for name, want := range map[string][]string{
		"test_image_content":          {`"type":"input_image"`, `data:image/png;base64,`},
		"test_embedded_resource":      {`"type":"input_file"`, `"filename":"` + conformance.EmbeddedName + `"`, `data:application/pdf;base64,`},
		"test_multiple_content_types": {conformance.MixedText, `"type":"input_image"`, `"filename":"` + conformance.MixedFileName + `"`},
	} {
		out := tooltest.Check(ctx, tools[name], `{}`)
		if out.Err != nil {
			t.Fatalf("%s: %v", name, out.Err)
		}
		item := string(out.Item)
		for _, w := range want {
			if !strings.Contains(item, w) {
				t.Errorf("%s: no %s in %s", name, w, item)
			}
		}
		if strings.Contains(item, "left out") {
			t.Errorf("%s: media left out: %s", name, item)
		}
	}
}

func TestPDFCrossReference(t *testing.T) {
	b := conformance.PDF("hello")
	if !bytes.HasPrefix(b, []byte("%PDF-1.4\n")) || !bytes.HasSuffix(b, []byte("%%EOF\n")) {
		t.Fatalf("not a PDF: %q", b)
	}
	// Every xref entry points at its object's header.
	xref := bytes.Index(b, []byte("xref\n"))
	lines := strings.Split(string(b[xref:]), "\n")[3:8]
	for i, l := range lines {
		off, err := strconv.Atoi(strings.Fields(l)[0])
		if err != nil {
			t.Fatal(err)
		}
		want := []byte(strconv.Itoa(i+1) + " 0 obj")
		if !bytes.HasPrefix(b[off:], want) {
			t.Errorf("entry %d: offset %d points at %q", i+1, off, b[off:off+10])
		}
	}
}

// The schemas the suite checks go out as written: the 2020-12 keywords and
// x-mcp-header are kept, not rewritten for strict mode.
func TestSchemasSentAsWritten(t *testing.T) {
	tools := byName(t)
	var got, want any
	if err := json.Unmarshal(tools["json_schema_2020_12_tool"].Schema(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(conformance.JSONSchema202012), &want); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("json_schema_2020_12_tool's schema:\n%s\nwant\n%s", g, w)
	}
	if !strings.Contains(string(tools["test_custom_headers"].Schema()), `"x-mcp-header":"Region"`) {
		t.Errorf("test_custom_headers: %s", tools["test_custom_headers"].Schema())
	}
	// The worker validates the 2020-12 schema: the conditional holds.
	ctx := context.Background()
	out := tooltest.Check(ctx, tools["json_schema_2020_12_tool"], `{"contactMethod":"phone","email":"a@b.c"}`)
	if out.Err == nil || out.Err.Kind != tool.InvalidArguments {
		t.Errorf("phone without a phone: %q (%v)", out.Output, out.Err)
	}
	out = tooltest.Check(ctx, tools["json_schema_2020_12_tool"], `{"contactMethod":"phone","phone":"1","address":{"city":"Oslo"}}`)
	if out.Err != nil {
		t.Errorf("valid arguments: %q (%v)", out.Output, out.Err)
	}
}

func TestProgressReports(t *testing.T) {
	tools := byName(t)
	var (
		mu   sync.Mutex
		done []int64
	)
	c := tooltest.Checker{Progress: func(d, total int64, _ string) {
		mu.Lock()
		defer mu.Unlock()
		if total != 100 {
			t.Errorf("total %d", total)
		}
		done = append(done, d)
	}}
	out := c.Check(context.Background(), tools["test_tool_with_progress"], `{}`)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(done) != 3 || done[0] != 0 || done[1] != 50 || done[2] != 100 {
		t.Errorf("progress %v, want [0 50 100]", done)
	}
}

func TestSlowComputeStopsOnCancel(t *testing.T) {
	tools := byName(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	out := tooltest.Check(ctx, tools["slow_compute"], `{"seconds":600}`)
	if out.Err == nil {
		t.Fatalf("ran to its end: %q", out.Output)
	}
}

func TestCategoryBinding(t *testing.T) {
	cat := conformance.Category()
	if err := cat.Validate(); err != nil {
		t.Fatal(err)
	}
	ts, err := cat.Tools(context.Background(), tool.Turn{Kind: "text"})
	if err != nil || len(ts) != len(conformance.Tools()) {
		t.Errorf("no bindings: %d tools (%v)", len(ts), err)
	}
	ts, _ = cat.Tools(context.Background(), tool.Turn{Kind: "text", Bindings: map[string]bool{conformance.Name: false}})
	if len(ts) != 0 {
		t.Errorf("bound off: %d tools", len(ts))
	}
}
