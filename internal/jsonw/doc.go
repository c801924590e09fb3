// Package jsonw writes JSON as encoding/json's Marshal writes it, byte for
// byte, without its reflection: the events and records every step writes
// (call.output, step.done, the journal's record, activity) are encoded
// field by field with these appenders, which send anything unusual back to
// json.Marshal rather than guess at it.
package jsonw
