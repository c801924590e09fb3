package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestRefusalsBounded: every refusal's text stays under MaxMessageBytes
// and its pointer under MaxPointerBytes, however deep or long the value
// it points into (a refusal of 10,000 levels once sent a 20 KB pointer).
func TestRefusalsBounded(t *testing.T) {
	long := strings.Repeat("k", 5000)
	deepKeys := strings.Repeat(`{"`+strings.Repeat("x", 40)+`":`, 400)
	for name, args := range map[string]string{
		"10,000 arrays":            strings.Repeat("[", 10001),
		"10,000 objects":           strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
		"513 objects, valid JSON":  strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
		"deep python":              strings.Repeat(`{'a':`, 600) + "True" + strings.Repeat("}", 600),
		"deep keys, bad escape":    deepKeys + `"\x1b"` + strings.Repeat("}", 400),
		"deep keys, cut":           deepKeys + `"abc`,
		"long key, bad escape":     `{"` + long + `": {"` + long + `": "\v"}}`,
		"long key, lone surrogate": `{"` + long + `": "\ud800", "b": 1,}`,
	} {
		_, _, err := Repair(args, RepairOptions{})
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a *SyntaxError", name, err)
			continue
		}
		if len(se.Error()) > MaxMessageBytes || len(se.Pointer) > MaxPointerBytes {
			t.Errorf("%s: a refusal of %d bytes with a pointer of %d", name, len(se.Error()), len(se.Pointer))
		}
		checkSentence(t, name, se.Error())
	}
}

// TestDepthLimit: MaxDepth levels are accepted, one more is refused with
// invalid arguments saying the limit, by the decoder and by the ladder,
// as sent or double-encoded or inside a string the schema wants as an
// object.
func TestDepthLimit(t *testing.T) {
	p, err := Compile(json.RawMessage(`{"type":"object","properties":{"v":{"type":"array"}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name string
		args string
		ok   bool
	}{
		{"deepest accepted", `{"v": ` + nest(MaxDepth-1) + `}`, true},
		{"one more", `{"v": ` + nest(MaxDepth) + `}`, false},
		{"one more, repaired", `{"v": ` + nest(MaxDepth) + `,}`, false},
		{"one more, double encoded", `"{\"v\": ` + nest(MaxDepth) + `}"`, false},
		{"deepest accepted, double encoded", `"{\"v\": ` + nest(MaxDepth-1) + `}"`, true},
		{"one more, in a string the schema wants as an array", `{"v": "` + nest(MaxDepth) + `"}`, false},
	} {
		_, _, err := p.ParseValue(tc.args, RepairOptions{})
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want success %v", tc.name, err, tc.ok)
		}
	}
	if _, _, err := p.ParseValue(`{"v": `+nest(MaxDepth)+`}`, RepairOptions{}); err == nil || !strings.Contains(err.Error(), "more than 512 levels") {
		t.Errorf("refusal %v does not name the limit", err)
	}
}
