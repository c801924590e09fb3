// Package schema provides the parameter schemas of tools and the checks
// every call's arguments pass before a tool sees them.
//
// Data flows one way. At definition time a schema is either inferred from
// a Go type (For, cached per type) or taken raw (Compile), compiled once
// with santhosh-tekuri/jsonschema, and, for strict tools, rewritten into
// the provider's strict subset for sending while the full schema is kept
// for validation. At call time Params.Parse takes the model's argument
// string through the repair ladder (Repair: a tolerant reader whose every
// rung is lossless, so that the value is the one reading of the text and a
// cut-off text is refused, never completed), removes the nulls a strict
// provider sends for absent optional fields, and validates the value
// against the full schema, reporting every violation with its JSON
// pointer.
//
// Remote references are never loaded: schemas that arrive in messages are
// compiled in isolation.
package schema
