package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Input requests (protocol 1.3): a call held mid-run because its tool's
// server asks a person for input. The record's entry has approval
// "input" and input.request {message, requested_schema}; the page shows
// the message and the schema's fields as a form, and the answer is a
// decision with "input" (approved) or a refusal (the server is told a
// decline). The workers check the input against the schema; the form
// only helps the person write a valid one.

// inputHold is the part of a held call's input hold the console reads.
type inputHold struct {
	Request struct {
		Message         string          `json:"message"`
		RequestedSchema json.RawMessage `json:"requested_schema"`
	} `json:"request"`
}

// maxInputFields bounds the fields a form shows; a schema with more is
// shown as its JSON, and answered in one text field.
const maxInputFields = 64

// inputField is one property of a requested schema, as a form field.
type inputField struct {
	Name, Title, Description string
	// Type is "string", "number", "integer", "boolean", or "enum"
	// (a string from Options); "json" for a schema the form cannot
	// show field by field: the whole input typed as JSON.
	Type     string
	Options  []string
	Required bool
	// Default fills the field; only a short value of printable ASCII
	// without runs of spaces does (a field draws the rest as it is, or
	// scrolls it out of view). Suggested shows any other default beside
	// the field, every character named, for the person to type.
	Default   string
	Suggested *shown
}

// maxFilled is the longest default a field is filled with.
const maxFilled = 64

// fillable reports whether a field may be filled with v: what the field
// draws of it is all of it, character for character.
func fillable(v string) bool {
	if len(v) > maxFilled || strings.Contains(v, "  ") || strings.HasPrefix(v, " ") || strings.HasSuffix(v, " ") {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// unseen is the first character of v that a field does not draw (a
// control, a bidirectional or invisible character), as its marker; ""
// when there is none.
func unseen(v string) string {
	for _, g := range visible(v) {
		if g.Mark && !g.Look && !strings.HasSuffix(g.Text, "space⟧") && !strings.HasSuffix(g.Text, "spaces⟧") {
			return g.Text
		}
	}
	return ""
}

// inputFields reads the fields of a requested schema (an object of flat,
// primitive properties, as MCP elicitation allows), by name. A schema
// that is not one gives one "json" field for the whole input.
func inputFields(schema []byte) []inputField {
	var s struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	whole := []inputField{{Name: "", Title: "Input (JSON)", Type: "json", Required: true}}
	if json.Unmarshal(schema, &s) != nil || s.Type != "object" || len(s.Properties) > maxInputFields {
		return whole
	}
	var out []inputField
	for name, raw := range s.Properties {
		var p struct {
			Type        string          `json:"type"`
			Title       string          `json:"title"`
			Description string          `json:"description"`
			Enum        []any           `json:"enum"`
			Default     json.RawMessage `json:"default"`
		}
		if json.Unmarshal(raw, &p) != nil {
			return whole
		}
		f := inputField{Name: name, Title: p.Title, Description: p.Description, Type: p.Type, Required: slices.Contains(s.Required, name)}
		if f.Title == "" {
			f.Title = name
		}
		if len(p.Enum) > 0 {
			for _, e := range p.Enum {
				v, ok := e.(string)
				if !ok {
					return whole
				}
				f.Options = append(f.Options, v)
			}
			f.Type = "enum"
		}
		switch f.Type {
		case "string", "number", "integer", "boolean", "enum":
		default:
			return whole
		}
		if len(p.Default) > 0 {
			var d any
			if json.Unmarshal(p.Default, &d) == nil {
				switch v := d.(type) {
				case string:
					f.Default = v
				case bool:
					f.Default = strconv.FormatBool(v)
				case float64:
					f.Default = strconv.FormatFloat(v, 'f', -1, 64)
				}
			}
		}
		if f.Type == "string" && !fillable(f.Default) {
			sh := showText([]byte(f.Default), maxShortShown)
			f.Suggested, f.Default = &sh, ""
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b inputField) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// buildInput is the input a form answers with: the fields' values under
// prefix (input.<call index>.<name>) typed as the schema says. A required
// field left empty, or a value that is not of its type, is an error that
// names it.
func buildInput(fields []inputField, form url.Values, prefix string) (json.RawMessage, error) {
	if len(fields) == 1 && fields[0].Type == "json" {
		v := strings.TrimSpace(form.Get(prefix))
		if !json.Valid([]byte(v)) {
			return nil, errors.New("the input is not JSON")
		}
		return json.RawMessage(v), nil
	}
	obj := map[string]any{}
	for _, f := range fields {
		v := form.Get(prefix + f.Name)
		if f.Type != "boolean" && f.Type != "string" {
			v = strings.TrimSpace(v)
		}
		if v == "" && f.Type != "boolean" {
			if f.Required {
				return nil, fmt.Errorf("%q is required", f.Title)
			}
			continue
		}
		switch f.Type {
		case "string":
			if m := unseen(v); m != "" {
				return nil, fmt.Errorf("%q holds %s, which the field does not draw: type what you mean", f.Title, m)
			}
			obj[f.Name] = v
		case "enum":
			if !slices.Contains(f.Options, v) {
				return nil, fmt.Errorf("%q must be one of its options", f.Title)
			}
			obj[f.Name] = v
		case "boolean":
			obj[f.Name] = v == "true"
		case "integer":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%q must be a whole number", f.Title)
			}
			obj[f.Name] = n
		case "number":
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
				return nil, fmt.Errorf("%q must be a number", f.Title)
			}
			obj[f.Name] = json.Number(strconv.FormatFloat(n, 'g', -1, 64))
		}
	}
	return json.Marshal(obj)
}
