package wire

import (
	"encoding/json"

	"github.com/agentbull/toolruntime/internal/textclip"
)

// FunctionOutput is the function_call_output item of a text output,
// protocol.FunctionCallOutput marshalled by hand: it is built for every
// call, and the encoder's reflection was a visible part of the dispatch
// cost. FuzzFunctionOutput holds it to encoding/json's bytes.
func FunctionOutput(callID, text string) json.RawMessage {
	size := len(`{"type":"function_call_output","call_id":"","output":""}`) + textclip.JSONLen(callID) // ids are short
	if len(text) <= maxExactText {
		size += textclip.JSONLen(text) // exactly the item's size: the common short output
	} else {
		size += len(text) + 8 // a few escapes without growing
	}
	return appendFunctionOutput(make([]byte, 0, size), callID, text)
}

// maxExactText bounds the output text whose encoded size FunctionOutput
// counts first, so that its item is allocated at exactly its size.
const maxExactText = 512

// appendFunctionOutput is FunctionOutput appended to b.
func appendFunctionOutput(b []byte, callID, text string) json.RawMessage {
	b = append(b, `{"type":"function_call_output","call_id":`...)
	b = AppendString(b, callID)
	b = append(b, `,"output":`...)
	b = AppendString(b, text)
	return append(b, '}')
}
