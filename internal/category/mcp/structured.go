package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

// outputSchema is a tool's compiled outputSchema: every structuredContent
// its calls return is checked against it. A nil *outputSchema checks
// nothing (the tool declares none).
type outputSchema struct {
	compiled *jsonschema.Schema
}

// compileOutputSchema compiles a tool's outputSchema, bounded like its
// input schema, with no remote references (a schema fetched from
// anywhere at call time would be a request the server chose); nil when
// the tool has none.
func compileOutputSchema(t *sdk.Tool) (*outputSchema, error) {
	if t.OutputSchema == nil {
		return nil, nil
	}
	b, err := json.Marshal(t.OutputSchema)
	if err != nil {
		return nil, fmt.Errorf("output schema: %w", err)
	}
	if len(b) > MaxToolSchema {
		return nil, fmt.Errorf("its output schema is %d bytes, more than the %d a tool may have", len(b), MaxToolSchema)
	}
	c := jsonschema.NewCompiler()
	c.LoadURL = func(s string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("remote reference %q is not allowed", s)
	}
	const url = "mem://output.json"
	if err := c.AddResource(url, bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("output schema is not usable: %w", err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("output schema is not usable: %w", err)
	}
	return &outputSchema{compiled: s}, nil
}

// check validates a result's structured content (as JSON) against the
// schema; the error says where it does not fit, in words a model can act
// on.
func (o *outputSchema) check(structured []byte) error {
	if o == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(structured))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	err := o.compiled.Validate(v)
	var ve *jsonschema.ValidationError
	if errors.As(err, &ve) {
		return errors.New(describeViolation(ve))
	}
	return err
}

// describeViolation lists the leaves of a validation error (where, and
// what), at most a few, in one line.
func describeViolation(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			at := e.InstanceLocation
			if at == "" {
				at = "/"
			}
			leaves = append(leaves, at+": "+e.Message)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	const most = 5
	if len(leaves) > most {
		leaves = append(leaves[:most], fmt.Sprintf("and %d more", len(leaves)-most))
	}
	return strings.Join(leaves, "; ")
}

// sameJSON reports whether text is a JSON encoding of the value b
// encodes: a server that also sends its structured content as text (as
// the MCP specification asks, for clients that read only text) does not
// get it twice in the model's output.
func sameJSON(text string, b []byte) bool {
	t := strings.TrimSpace(text)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return t == string(b)
	}
	var x, y any
	if json.Unmarshal([]byte(t), &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
