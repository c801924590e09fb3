package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"time"

	"github.com/agentbull/toolruntime/tool"
)

// Name is the category's name, and the binding that switches it off for a
// turn ("mcp_conformance": false).
const Name = "mcp_conformance"

// The texts the suite's scenarios look for.
const (
	SimpleText    = "This is a simple text response for testing."
	ErrorText     = "This tool intentionally returns an error for testing"
	EmbeddedText  = "This is an embedded resource content."
	MixedText     = "Multiple content types test:"
	EmbeddedName  = "embedded-resource.pdf"
	MixedFileName = "mixed-content-resource.pdf"
)

// The fixtures of the input-required-result scenarios that a held call
// expresses: scripts/mcp-conformance.sh starts the fixture worker with
// --approval naming them.
const (
	HeldElicitation   = "test_input_required_result_elicitation"
	HeldTamperedState = "test_input_required_result_tampered_state"
)

// ProgressGap is the wait between two progress reports of
// test_tool_with_progress: longer than the worker's least interval between
// two progress events of a call (internal/turn.ProgressInterval, 250 ms),
// so that none is coalesced with the next.
const ProgressGap = 300 * time.Millisecond

// The failures of failing_job and protocol_error_job.
const (
	FailingJobAfter   = time.Second
	FailingJobText    = "The job failed (MCP conformance fixture)."
	ProtocolErrorText = "The worker could not run the job (MCP conformance fixture)."
)

// MaxSlowSeconds bounds slow_compute's seconds.
const MaxSlowSeconds = 600

// JSONSchema202012 is json_schema_2020_12_tool's input schema, the suite's
// fixture as it is (SEP-1613, SEP-2106): the door must list it byte for
// byte, keywords included.
const JSONSchema202012 = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
	`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
	`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},"phone":{"type":"string"},"email":{"type":"string"}},` +
	`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
	`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},"then":{"required":["phone"]},"else":{"required":["email"]},` +
	`"additionalProperties":false}`

// customHeadersSchema has a string parameter that the MCP client mirrors
// into an Mcp-Param-Region header (SEP-2243), which the door checks
// against the body.
const customHeadersSchema = `{"type":"object","properties":{` +
	`"region":{"type":"string","description":"Where to run; sent as the Mcp-Param-Region header too.","x-mcp-header":"Region"},` +
	`"query":{"type":"string","description":"Any text."}},"required":["region"]}`

type none struct{}

// Category returns the fixture category, its tools built once, for a
// worker (worker.New, worker.Main).
func Category() tool.Category {
	ts := Tools()
	return tool.Category{Name: Name, Tools: func(_ context.Context, t tool.Turn) ([]*tool.Tool, error) {
		if off, set := t.Bindings[Name]; set && !off {
			return nil, nil
		}
		return ts, nil
	}}
}

// Tools returns the fixture tools, in catalog order.
func Tools() []*tool.Tool {
	redPixel := pngOf(color.RGBA{R: 255, A: 255})
	return []*tool.Tool{
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_simple_text", Description: "Returns a simple text (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Content: SimpleText}, nil
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_image_content", Description: "Returns a 1x1 red PNG image (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Content: "A red pixel.", Media: []tool.Media{{MIMEType: "image/png", Data: redPixel}}}, nil
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_embedded_resource", Description: "Returns a file, a PDF holding a short text (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Media: []tool.Media{{MIMEType: "application/pdf", Data: PDF(EmbeddedText), Filename: EmbeddedName}}}, nil
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_multiple_content_types", Description: "Returns a text, an image and a file (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Content: MixedText, Media: []tool.Media{
					{MIMEType: "image/png", Data: redPixel},
					{MIMEType: "application/pdf", Data: PDF(`{"test":"data","value":123}`), Filename: MixedFileName},
				}}, nil
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_error_handling", Description: "Always fails with a tool error (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{}, tool.Errorf(tool.ToolError, "%s", ErrorText)
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "test_tool_with_progress", Description: "Reports progress 0, 50 and 100 of 100 (MCP conformance fixture).", ReadOnly: true},
			Execute: func(ctx context.Context, _ none) (tool.Result, error) {
				for i, done := range []int64{0, 50, 100} {
					if i > 0 {
						if err := sleep(ctx, ProgressGap); err != nil {
							return tool.Result{}, err
						}
					}
					tool.ReportProgress(ctx, done, 100, fmt.Sprintf("step %d of 3", i+1))
				}
				// The last report is published only after the least
				// interval since the one before; wait for it, so that
				// the call's end does not overtake it.
				if err := sleep(ctx, ProgressGap); err != nil {
					return tool.Result{}, err
				}
				return tool.Result{Content: "Progress test completed."}, nil
			},
		}),
		tool.Must(tool.Def[json.RawMessage]{
			Spec: tool.Spec{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features (MCP conformance fixture).",
				ReadOnly: true, JSONSchema: json.RawMessage(JSONSchema202012)},
			Execute: func(_ context.Context, p json.RawMessage) (tool.Result, error) {
				return tool.Result{Content: "Received " + string(p)}, nil
			},
		}),
		tool.Must(tool.Def[customHeaders]{
			Spec: tool.Spec{Name: "test_custom_headers", Description: "Echoes a parameter the client also sends as a header (MCP conformance fixture).",
				ReadOnly: true, JSONSchema: json.RawMessage(customHeadersSchema)},
			Execute: func(_ context.Context, p customHeaders) (tool.Result, error) {
				return tool.Result{Content: "region: " + p.Region}, nil
			},
		}),
		tool.Must(tool.Def[greetParams]{
			Spec: tool.Spec{Name: "greet", Description: "Greets someone by name (MCP conformance fixture).", ReadOnly: true},
			Execute: func(_ context.Context, p greetParams) (tool.Result, error) {
				return tool.Result{Content: "Hello, " + p.Name + "!"}, nil
			},
		}),
		tool.Must(tool.Def[slowParams]{
			Spec: tool.Spec{Name: "slow_compute", Description: "Waits some seconds, reporting progress each second, then answers (MCP conformance fixture).",
				ReadOnly: true, NotStrict: "label is optional and seconds bounded; a plain schema says so best"},
			Activity: func(p slowParams) string { return fmt.Sprintf("Computing %q for %g s", p.Label, p.Seconds) },
			Execute:  slowCompute,
		}),
		// A person's approval is the one input a fleet call asks its MCP
		// client for: held (the worker's --approval lists them), these
		// become the door's input_required results with a sealed
		// requestState (2026-07-28), which the suite then answers,
		// tampers with or leaves out.
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: HeldElicitation, Description: "Runs once a person approves it (MCP conformance fixture, held for approval)."},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Content: "Approved, and run."}, nil
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: HeldTamperedState, Description: "Runs once a person approves it (MCP conformance fixture, held for approval)."},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{Content: "Approved, and run."}, nil
			},
		}),
		// The tasks scenarios' failures: a tool error after a second
		// (a task that completes with isError) and an error of the worker
		// (a task that fails, with an error and no result).
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "failing_job", Description: "Works a second, then fails with a tool error (MCP conformance fixture).", ReadOnly: true},
			Execute: func(ctx context.Context, _ none) (tool.Result, error) {
				if err := sleep(ctx, FailingJobAfter); err != nil {
					return tool.Result{}, tool.Errorf(tool.Aborted, "stopped: %v", context.Cause(ctx))
				}
				return tool.Result{}, tool.Errorf(tool.ToolError, "%s", FailingJobText)
			},
		}),
		tool.Must(tool.Def[none]{
			Spec: tool.Spec{Name: "protocol_error_job", Description: "Fails as the worker does when it cannot run a call (MCP conformance fixture).", ReadOnly: true},
			Execute: func(context.Context, none) (tool.Result, error) {
				return tool.Result{}, tool.Errorf(tool.Internal, "%s", ProtocolErrorText)
			},
		}),
		tool.Must(tool.Def[deleteParams]{
			Spec: tool.Spec{Name: "confirm_delete", Description: "Pretends to delete a file; destructive, so a principal's approval scope may hold it (MCP conformance fixture).",
				Destructive: true, NotStrict: "path and filename are alternatives"},
			Activity: func(p deleteParams) string { return "Deleting " + p.Path },
			Execute: func(_ context.Context, p deleteParams) (tool.Result, error) {
				if p.Path == "" {
					p.Path = p.Filename
				}
				return tool.Result{Content: "Deleted " + p.Path}, nil
			},
		}),
	}
}

type customHeaders struct {
	Region string `json:"region"`
	Query  string `json:"query,omitempty"`
}

type greetParams struct {
	Name string `json:"name" jsonschema:"description=Whom to greet.,maxLength=200"`
}

type slowParams struct {
	Seconds float64 `json:"seconds" jsonschema:"description=How long to work.,minimum=0,maximum=600"`
	Label   string  `json:"label,omitempty" jsonschema:"description=A name for the computation.,maxLength=200"`
}

type deleteParams struct {
	Path string `json:"path,omitempty" jsonschema:"description=The file to delete.,maxLength=1000"`
	// Filename is what the suite's tasks scenarios name the file.
	Filename string `json:"filename,omitempty" jsonschema:"description=The file to delete (when path is not given).,maxLength=1000"`
}

func slowCompute(ctx context.Context, p slowParams) (tool.Result, error) {
	if p.Seconds < 0 || p.Seconds > MaxSlowSeconds {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "seconds must be between 0 and %d", MaxSlowSeconds)
	}
	total := time.Duration(p.Seconds * float64(time.Second))
	start := time.Now()
	for elapsed := time.Duration(0); elapsed < total; elapsed = time.Since(start) {
		tool.ReportProgress(ctx, int64(elapsed/time.Millisecond), int64(total/time.Millisecond), "computing")
		if err := sleep(ctx, min(time.Second, total-elapsed)); err != nil {
			return tool.Result{}, tool.Errorf(tool.Aborted, "stopped after %.1f s: %v", time.Since(start).Seconds(), context.Cause(ctx))
		}
	}
	return tool.Result{Content: fmt.Sprintf("Computed %q in %g s.", p.Label, p.Seconds)}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func pngOf(c color.Color) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, c)
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err) // an in-memory 1x1 image always encodes
	}
	return b.Bytes()
}

// PDF returns a one-page PDF file that shows text (ASCII, without
// parentheses or backslashes), with a correct cross-reference table.
func PDF(text string) []byte {
	content := fmt.Sprintf("BT /F1 10 Tf 10 20 Td (%s) Tj ET", text)
	objects := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 400 40] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objects))
	for i, o := range objects {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objects)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objects)+1, xref)
	return b.Bytes()
}
