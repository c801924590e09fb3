package schema

import (
	"fmt"
	"reflect"
	"strings"
)

// A field's jsonschema tag is read in one of two forms:
//
//   - invopop/jsonschema's: comma-separated key=value keywords
//     (description=…,minimum=1) and the bare words required, nullable and
//     "-";
//   - the MCP Go SDK's (google/jsonschema-go): a tag with no "=" at all
//     whose words are not invopop's bare words is, whole, the description
//     (`jsonschema:"the file, relative to the home"`).
//
// Anything else is refused with the reason, rather than dropped: an item
// that is neither a known keyword nor a bare word (a description's "="
// after an unescaped comma), or prose mixed with the bare words.

// bareWords are invopop's keywords without a value.
var bareWords = map[string]bool{"-": true, "required": true, "nullable": true}

// tagKeys are the keys invopop reads in key=value items.
var tagKeys = map[string]bool{
	"title": true, "description": true, "type": true, "anchor": true,
	"oneof_required": true, "anyof_required": true, "oneof_ref": true, "oneof_type": true, "anyof_ref": true, "anyof_type": true,
	"minLength": true, "maxLength": true, "pattern": true, "format": true, "readOnly": true, "writeOnly": true,
	"default": true, "example": true, "enum": true,
	"multipleOf": true, "minimum": true, "maximum": true, "exclusiveMaximum": true, "exclusiveMinimum": true,
	"minItems": true, "maxItems": true, "uniqueItems": true,
	"contentEncoding": true, "contentMediaType": true, "dependencies": true, "patternProperties": true,
}

// sdkDescription returns the description a jsonschema tag in the MCP Go
// SDK's form holds (the whole tag), or "" when the tag is in invopop's.
func sdkDescription(tag string) string {
	if tag == "" || strings.Contains(tag, "=") {
		return ""
	}
	for _, item := range splitTag(tag) {
		// "the path, required" is refused (checkTag), not read either way.
		if bareWords[strings.TrimSpace(item)] {
			return ""
		}
	}
	return tag
}

// checkTag refuses a jsonschema tag that would be partly dropped.
func checkTag(tag string) error {
	if tag == "" || sdkDescription(tag) != "" {
		return nil
	}
	items := splitTag(tag)
	if !strings.Contains(tag, "=") {
		for _, item := range items {
			if !bareWords[strings.TrimSpace(item)] {
				return fmt.Errorf("it mixes the words %q with invopop's bare keywords (required, nullable, -): write the description as description=… (a comma in it as \\,), or the whole tag as the description without them", item)
			}
		}
		return nil
	}
	for _, item := range items {
		key, _, hasValue := strings.Cut(item, "=")
		switch {
		case !hasValue && bareWords[item]:
		case !hasValue:
			return fmt.Errorf("%q is neither key=value nor required, nullable or -: a comma inside a description is written \\, (a tag without any \"=\" is read whole as the description)", item)
		case !tagKeys[key]:
			return fmt.Errorf("%q: %q is not a keyword invopop/jsonschema reads (description, minimum, maxLength, enum, pattern, …); a comma inside a description is written \\,", item, key)
		}
	}
	return nil
}

// checkTags checks the jsonschema tags of t's fields, and of every
// struct t's fields hold, naming the field (path.Field.Inner) of the
// first it refuses.
func checkTags(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return nil
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		at := path + "." + f.Name
		if err := checkTag(f.Tag.Get("jsonschema")); err != nil {
			return fmt.Errorf("field %s: jsonschema tag %q: %w", at, f.Tag.Get("jsonschema"), err)
		}
		if err := checkTags(f.Type, at, seen); err != nil {
			return err
		}
	}
	return nil
}

// fieldDescription is the invopop Reflector's LookupComment: the
// description of a field whose tag is in the MCP Go SDK's form.
func fieldDescription(t reflect.Type, field string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if field == "" || t.Kind() != reflect.Struct {
		return ""
	}
	f, ok := t.FieldByName(field)
	if !ok {
		return ""
	}
	return sdkDescription(f.Tag.Get("jsonschema"))
}

// splitTag splits a jsonschema tag on the commas not escaped with a
// backslash, as invopop does.
func splitTag(tag string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			b.WriteByte(',')
			i++
		case tag[i] == ',':
			out = append(out, b.String())
			b.Reset()
		default:
			b.WriteByte(tag[i])
		}
	}
	return append(out, b.String())
}
