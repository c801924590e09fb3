package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/tool"
)

// benchParams is a typical six-field call: a string, a bounded integer, a
// boolean, an enum, an array of strings and a nested object.
type benchParams struct {
	Query  string      `json:"query" jsonschema:"description=What to search for.,minLength=1,maxLength=500"`
	Limit  int         `json:"limit" jsonschema:"minimum=1,maximum=100"`
	Exact  bool        `json:"exact,omitempty"`
	Sort   string      `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date,enum=popularity"`
	Sites  []string    `json:"sites,omitempty" jsonschema:"maxItems=10"`
	Window benchWindow `json:"window"`
}

type benchWindow struct {
	From string `json:"from" jsonschema:"format=date"`
	Days int    `json:"days,omitempty" jsonschema:"minimum=1,maximum=365"`
}

const benchArgs = `{"query":"golang structured concurrency patterns","limit":20,"exact":false,"sort":"date","sites":["go.dev","github.com","pkg.go.dev"],"window":{"from":"2024-01-01","days":90}}`

func benchTool(b *testing.B, strict bool) *tool.Tool {
	b.Helper()
	notStrict := ""
	if !strict {
		notStrict = "the benchmark of the path without null handling"
	}
	return tool.Must(tool.Def[benchParams]{
		Spec: tool.Spec{Name: "search", Description: "Search.", ReadOnly: true, NotStrict: notStrict},
		Execute: func(context.Context, benchParams) (tool.Result, error) {
			return tool.Result{}, nil
		},
	})
}

// BenchmarkValidateDecode is Prepare: the repair ladder's first rung,
// validation against the full schema and the decode into the tool's type.
// Compare with BenchmarkPlainDecode.
func BenchmarkValidateDecode(b *testing.B) {
	tool := benchTool(b, false)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		if _, err := tools.Prepare(tool, benchArgs, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateDecodeStrict adds the strict null handling.
func BenchmarkValidateDecodeStrict(b *testing.B) {
	tool := benchTool(b, true)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		if _, err := tools.Prepare(tool, benchArgs, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainDecode is json.Unmarshal of the same bytes into the same
// struct: the floor Prepare is measured against.
func BenchmarkPlainDecode(b *testing.B) {
	data := []byte(benchArgs)
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		var p benchParams
		if err := json.Unmarshal(data, &p); err != nil {
			b.Fatal(err)
		}
	}
}
