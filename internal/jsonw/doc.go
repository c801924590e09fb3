// Package jsonw writes JSON as encoding/json's Marshal writes it, byte for
// byte, without its reflection: the events and records every step writes
// (call.output, step.done, the journal's record, activity) are encoded
// field by field with these appenders (and so is a function_call_output
// item's text). Strings are escaped as json.Marshal escapes them; raw JSON
// that is unusual is sent back to json.Marshal rather than guessed at.
package jsonw
