package tool_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/tool"
)

// readParams are written in the MCP Go SDK's style: the tag is the
// description.
type readParams struct {
	Path string `json:"path" jsonschema:"the file to read, relative to the home"`
}

type droppedParams struct {
	Path string `json:"path" jsonschema:"description=the file, relative to the home"`
}

// A tag in the MCP Go SDK's style reaches the model as the description;
// one the schema would read only part of is refused by tool.New.
func TestNewReadsSDKStyleTags(t *testing.T) {
	run := func(context.Context, readParams) (tool.Result, error) { return tool.Result{}, nil }
	tl, err := tool.New(tool.Def[readParams]{Spec: tool.Spec{Name: "read", Description: "Read a file."}, Execute: run})
	if err != nil {
		t.Fatal(err)
	}
	var def struct {
		Parameters struct {
			Properties map[string]struct{ Description string } `json:"properties"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal(tl.Definition(), &def); err != nil {
		t.Fatal(err)
	}
	if got := def.Parameters.Properties["path"].Description; got != "the file to read, relative to the home" {
		t.Errorf("the model reads the description %q, want the whole tag; definition %s", got, tl.Definition())
	}

	_, err = tool.New(tool.Def[droppedParams]{Spec: tool.Spec{Name: "read", Description: "Read a file."},
		Execute: func(context.Context, droppedParams) (tool.Result, error) { return tool.Result{}, nil }})
	if err == nil || !strings.Contains(err.Error(), "droppedParams.Path") || !strings.Contains(err.Error(), `\,`) {
		t.Errorf("a description cut at its comma: %v, want it refused naming the field and the escape", err)
	}
}
