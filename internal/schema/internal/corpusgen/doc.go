// Command corpusgen writes the repair corpus of package schema
// (testdata/repair/): realistic argument objects of the runtime's own
// tools and of MCP-like tools, each sent as models really damage them:
// fenced, wrapped in prose or tags, printed as a Python dict, with
// comments, trailing or missing commas, raw newlines, undefined escapes,
// double-encoded, and cut off at every kind of position; then the shapes
// of issues 22 and 24 by hand (shapes_*) and, family by family, the ones
// a hostile or careless model sends (hostile_*: every escape of C,
// Python, JavaScript, Go, Rust and JSON5, surrogates, raw bytes, numbers,
// literals, keys, fences, encodings, wrappers, cuts, depth and width).
//
// Each case says what the ladder must do: recover the original value
// exactly, or refuse (a cut, or a text with two readings). The seeds are
// fixed, so the output is the same on every run:
//
//	go generate ./internal/schema
package main
