package jsonw

import (
	"bytes"
	"encoding/json"
)

// String appends s as a JSON string, as json.Marshal writes it: printable
// ASCII without quotes, backslashes or HTML's <, > and & as it is (ids,
// names, digests), anything else through json.Marshal.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Strings appends ss as a JSON array of strings (String); nil is null.
func Strings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = String(b, s)
	}
	return append(b, ']')
}

// Raw appends raw as json.Marshal writes a json.RawMessage: null when
// nil, else validated and compacted, with HTML's <, > and & and the line
// separators U+2028 and U+2029 escaped. Raw JSON holding any of those
// (none does that json.Marshal wrote) is not appended: ok is false, and
// the caller leaves its value to json.Marshal, which also says what is
// wrong with raw JSON that is not valid.
func Raw(b []byte, raw json.RawMessage) ([]byte, bool) {
	if raw == nil {
		return append(b, "null"...), true
	}
	for _, c := range raw {
		if c == '<' || c == '>' || c == '&' || c == 0xe2 {
			return nil, false
		}
	}
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, raw) != nil {
		return nil, false
	}
	return buf.Bytes(), true
}
