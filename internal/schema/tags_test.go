package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
)

type sdkItem struct {
	Label string `json:"label" jsonschema:"the item's label, as shown"`
}

type sdkParams struct {
	Path  string    `json:"path" jsonschema:"the file, relative to the home"`
	Depth int       `json:"depth,omitempty" jsonschema:"how deep to go"`
	Items []sdkItem `json:"items,omitempty"`
	// invopop's own forms are read too.
	Mode  string `json:"mode" jsonschema:"description=read or write\\, nothing else,enum=read,enum=write"`
	Force bool   `json:"force,omitempty" jsonschema:"nullable"`
}

// A jsonschema tag without "=" (the MCP Go SDK's form) is the whole
// description; invopop's key=value form is unchanged.
func TestForReadsSDKStyleTagsAsTheDescription(t *testing.T) {
	p, err := schema.For[sdkParams](false)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]struct {
			Description string `json:"description"`
			Enum        []string
			OneOf       []any `json:"oneOf"`
			Items       struct {
				Properties map[string]struct {
					Description string `json:"description"`
				} `json:"properties"`
			} `json:"items"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(p.Full(), &s); err != nil {
		t.Fatal(err)
	}
	for prop, want := range map[string]string{"path": "the file, relative to the home", "depth": "how deep to go", "mode": "read or write, nothing else"} {
		if got := s.Properties[prop].Description; got != want {
			t.Errorf("%s: description %q, want %q", prop, got, want)
		}
	}
	if got := s.Properties["items"].Items.Properties["label"].Description; got != "the item's label, as shown" {
		t.Errorf("items[].label: description %q", got)
	}
	if got := s.Properties["mode"].Enum; len(got) != 2 {
		t.Errorf("mode: enum %v, want read and write", got)
	}
	if len(s.Properties["force"].OneOf) != 2 || s.Properties["force"].Description != "" {
		t.Errorf("force: nullable is invopop's keyword, not a description: %+v", s.Properties["force"])
	}
}

type mixedParams struct {
	Path string `json:"path" jsonschema:"the path, required"`
}

type unknownKeyParams struct {
	N int `json:"n" jsonschema:"description=how many,minimum=1,max=5"`
}

type unescapedCommaParams struct {
	Q string `json:"q" jsonschema:"description=what to find, in a few words,minLength=1"`
}

type nestedBadParams struct {
	Items []struct {
		X string `json:"x" jsonschema:"description=x=1 means one,set x=2 for two"`
	} `json:"items"`
}

// A tag invopop would read only part of is refused with the field and
// the reason, never dropped in silence.
func TestForRefusesTagsItWouldDrop(t *testing.T) {
	for _, c := range []struct {
		name string
		for_ func() error
		want []string
	}{
		{"prose mixed with a bare keyword", func() error { _, err := schema.For[mixedParams](false); return err }, []string{"mixedParams.Path", `"the path"`}},
		{"an unknown key", func() error { _, err := schema.For[unknownKeyParams](false); return err }, []string{"unknownKeyParams.N", `"max" is not a keyword`}},
		{"a comma not escaped", func() error { _, err := schema.For[unescapedCommaParams](false); return err }, []string{"unescapedCommaParams.Q", `" in a few words"`, `\,`}},
		{"nested in a slice", func() error { _, err := schema.For[nestedBadParams](true); return err }, []string{"nestedBadParams.Items.X", `"set x" is not a keyword`}},
	} {
		err := c.for_()
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}
