package bus

import (
	"encoding/json"

	"github.com/agentbull/toolruntime/protocol"
)

// encode writes rec as json.Marshal does, byte for byte, at about half
// its cost: json.Marshal validates and compacts again what the outcome's
// MarshalJSON wrote (a second pass over the whole outcome), which was a
// twentieth of a no-op step's CPU. The outcome is written by its own
// MarshalJSON and spliced in as it is (json.Marshal's output, so compact
// and HTML-escaped already); the short strings beside it are quoted here.
func (rec *callRecord) encode() ([]byte, error) {
	var outcome []byte
	if rec.Outcome != nil {
		var err error
		if outcome, err = rec.Outcome.MarshalJSON(); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, len(outcome)+len(rec.Worker)+len(rec.Claim)+len(rec.Digest)+64)
	b = append(b, `{"state":`...)
	b = appendString(b, rec.State)
	if rec.Worker != "" {
		b = appendString(append(b, `,"worker":`...), rec.Worker)
	}
	if rec.Claim != "" {
		b = appendString(append(b, `,"claim":`...), rec.Claim)
	}
	if outcome != nil {
		b = append(append(b, `,"outcome":`...), outcome...)
	}
	if rec.Digest != "" {
		b = appendString(append(b, `,"digest":`...), rec.Digest)
	}
	return append(b, '}'), nil
}

// appendString appends s as a JSON string, as json.Marshal writes it:
// printable ASCII without quotes, backslashes or HTML's <, > and & as it
// is (worker names, claim ids, digests), anything else through
// json.Marshal.
func appendString(b []byte, s string) []byte {
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

// encodeActivity writes a as json.Marshal does, byte for byte: every
// call publishes two (started, completed), and json.Marshal's reflection
// was most of their cost. Progress events go through json.Marshal.
func encodeActivity(a protocol.Activity) ([]byte, error) {
	if a.Progress != nil {
		return json.Marshal(a)
	}
	b := make([]byte, 0, len(a.CallID)+len(a.Name)+len(a.State)+len(a.Label)+48)
	b = appendString(append(b, `{"call_id":`...), a.CallID)
	b = appendString(append(b, `,"name":`...), a.Name)
	b = appendString(append(b, `,"state":`...), a.State)
	b = appendString(append(b, `,"label":`...), a.Label)
	return append(b, '}'), nil
}
