package bus

import (
	"encoding/json"
	"slices"

	"github.com/agentbull/toolruntime/internal/jsonw"
	"github.com/agentbull/toolruntime/protocol"
)

// encodeActivity writes a as json.Marshal does, byte for byte: every
// call publishes two (started, completed), and json.Marshal's reflection
// was most of their cost. Progress events go through json.Marshal.
func encodeActivity(a protocol.Activity) ([]byte, error) { return appendActivity(nil, a) }

// appendActivity appends a to b as encodeActivity writes it.
func appendActivity(b []byte, a protocol.Activity) ([]byte, error) {
	if a.Progress != nil {
		data, err := json.Marshal(a)
		if b == nil {
			return data, err
		}
		return append(b, data...), err
	}
	b = slices.Grow(b, len(a.CallID)+len(a.Name)+len(a.State)+len(a.Label)+48)
	b = jsonw.String(append(b, `{"call_id":`...), a.CallID)
	b = jsonw.String(append(b, `,"name":`...), a.Name)
	b = jsonw.String(append(b, `,"state":`...), a.State)
	b = jsonw.String(append(b, `,"label":`...), a.Label)
	return append(b, '}'), nil
}
