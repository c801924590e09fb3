package turnstate

import "github.com/agentbull/toolruntime/internal/wire"

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
	b = wire.AppendString(b, rec.State)
	if rec.Worker != "" {
		b = wire.AppendString(append(b, `,"worker":`...), rec.Worker)
	}
	if rec.Claim != "" {
		b = wire.AppendString(append(b, `,"claim":`...), rec.Claim)
	}
	if outcome != nil {
		b = append(append(b, `,"outcome":`...), outcome...)
	}
	if rec.Digest != "" {
		b = wire.AppendString(append(b, `,"digest":`...), rec.Digest)
	}
	return append(b, '}'), nil
}
