// Package wire writes the worker's side of the wire format: JSON byte
// for byte as encoding/json's Marshal writes it, without its reflection
// (AppendString, AppendStrings, AppendRaw), for the events and records
// every step writes. Strings are escaped as json.Marshal escapes them;
// raw JSON that is unusual is sent back to json.Marshal rather than
// guessed at.
package wire
