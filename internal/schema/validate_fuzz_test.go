package schema_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentbull/toolruntime/internal/schema"
)

// fuzzParams is a realistic parameter type: every integer bounded (the
// schema has no other way to say what fits a Go int), a nested optional
// object and an array of objects.
type fuzzParams struct {
	Query  string       `json:"query" jsonschema:"description=What to search for.,minLength=1,maxLength=200"`
	Limit  int          `json:"limit,omitempty" jsonschema:"minimum=1,maximum=100"`
	Exact  bool         `json:"exact,omitempty"`
	Sort   string       `json:"sort,omitempty" jsonschema:"enum=relevance,enum=date"`
	Tags   []string     `json:"tags,omitempty" jsonschema:"maxItems=10"`
	Filter *fuzzFilter  `json:"filter,omitempty"`
	Ranges []fuzzWindow `json:"ranges,omitempty"`
}

type fuzzFilter struct {
	Path  string  `json:"path" jsonschema:"pattern=^/"`
	Depth int     `json:"depth,omitempty" jsonschema:"minimum=0,maximum=10"`
	Score float64 `json:"score,omitempty" jsonschema:"minimum=0,maximum=1"`
}

type fuzzWindow struct {
	From int64  `json:"from" jsonschema:"minimum=0,maximum=4102444800"`
	To   *int64 `json:"to,omitempty" jsonschema:"minimum=0,maximum=4102444800"`
	Note string `json:"note,omitempty"`
}

// rawStrictParams is a hand-written raw schema for a strict tool, decoded
// into rawStrictArgs.
const rawStrictParams = `{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "maxLength": 500},
    "cwd":     {"type": "string", "pattern": "^/"},
    "timeout": {"type": "integer", "minimum": 1, "maximum": 600},
    "env":     {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Z_]+$"}, "value": {"type": "string"}}, "required": ["name"]}},
    "shell":   {"type": "string", "enum": ["sh", "bash"]},
    "dry_run": {"type": ["boolean", "null"]}
  },
  "required": ["command", "dry_run"]
}`

type rawStrictArgs struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
	Timeout int    `json:"timeout"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	Shell  string `json:"shell"`
	DryRun *bool  `json:"dry_run"`
}

var fuzzSeeds = []string{
	``,
	`{}`,
	`{"query":"go"}`,
	`{"query":"go","limit":10,"exact":true,"sort":"date","tags":["a","b"],"filter":{"path":"/x","depth":2,"score":0.5},"ranges":[{"from":1,"to":2,"note":"n"}]}`,
	`{"query":"go","limit":null,"sort":null,"filter":{"path":"/x","depth":null},"ranges":[{"from":0,"to":null}]}`,
	`{"query":"go","limit":1.0,"ranges":[{"from":1e3,"to":2.0e1}]}`,
	`{"query":"go","limit":1e1000001}`,
	`{"query":"go","limit":1e999999}`,
	`{"query":"go","limit":-0.0}`,
	`{"query":"go","Limit":5}`,
	`{"query":"go","limit":5,"limit":500}`,
	"```json\n{\"query\":\"fenced\"}\n```",
	`{"query":"trunc","tags":["a","b`,
	`{query: 'single', limit: 3,}`,
	`{"command":"ls -la","dry_run":null}`,
	`{"command":"ls","cwd":"/tmp","timeout":30,"env":[{"name":"HOME","value":null},{"name":"X","value":"1"}],"shell":"bash","dry_run":false}`,
	`{"command":"rm -rf /tmp/x","cwd":null,"timeout":null,"env":null,"shell":null,"dry_run":true}`,
	`{"command":"x","dry_run":null,"timeout":600.0}`,
	`{"command":"x","dry_run":null,"env":[null]}`,
	`[1,2,3]`,
	`"just a string"`,
	`null`,
	`{"query":"\u0000\ud800","limit":100}`,
}

// FuzzValidate: Parse never panics on any argument string, and whatever it
// accepts validates against the full schema again and decodes into the Go
// type the tool will use.
func FuzzValidate(f *testing.F) {
	plain, err := schema.For[fuzzParams](false)
	if err != nil {
		f.Fatal(err)
	}
	strict, err := schema.For[fuzzParams](true)
	if err != nil {
		f.Fatal(err)
	}
	raw, err := schema.Compile(json.RawMessage(rawStrictParams), true)
	if err != nil {
		f.Fatal(err)
	}
	type target struct {
		name   string
		p      *schema.Params
		decode func(schema.Value) error
	}
	targets := []target{
		{"inferred", plain, func(v schema.Value) error { var x fuzzParams; return v.Unmarshal(&x) }},
		{"inferred strict", strict, func(v schema.Value) error { var x fuzzParams; return v.Unmarshal(&x) }},
		{"raw strict", raw, func(v schema.Value) error { var x rawStrictArgs; return v.Unmarshal(&x) }},
	}
	for _, s := range fuzzSeeds {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, args string, conservative bool) {
		opt := schema.RepairOptions{Conservative: conservative}
		for _, tg := range targets {
			got, err := tg.p.Parse(args, opt)
			if err != nil {
				var ve *schema.ValidationError
				if !errors.As(err, &ve) && !errors.Is(err, schema.ErrUnparseable) && !errors.Is(err, schema.ErrArgumentsTooLarge) {
					t.Fatalf("%s: Parse(%q) returned an unclassified error %v (%T)", tg.name, args, err, err)
				}
				if ve != nil && len(ve.Violations) == 0 {
					t.Fatalf("%s: Parse(%q) returned a validation error without violations", tg.name, args)
				}
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(got.JSON))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: Parse(%q) returned invalid JSON %q: %v", tg.name, args, got.JSON, err)
			}
			if dec.More() {
				t.Fatalf("%s: Parse(%q) returned more than one value: %q", tg.name, args, got.JSON)
			}
			if err := tg.p.Validate(v); err != nil {
				t.Fatalf("%s: Parse(%q) returned %s, which does not validate: %v", tg.name, args, got.JSON, err)
			}
			pv, _, err := tg.p.ParseValue(args, opt)
			if err != nil {
				t.Fatalf("%s: Parse(%q) accepted what ParseValue refuses: %v", tg.name, args, err)
			}
			if err := tg.decode(pv); err != nil {
				t.Fatalf("%s: Parse(%q) returned %s, which does not decode into the Go type: %v", tg.name, args, got.JSON, err)
			}
		}
	})
}
