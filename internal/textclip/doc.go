// Package textclip is the one place text is cut to a budget, for every
// package of the module: rune-safe cuts (Head, Tail), a cut marked with
// an ellipsis or a note, a cut of a text that travels inside a JSON
// string to the encoded bytes it may take (Text, Reason, List), and
// sizes written for people.
//
// It imports only the standard library. protocol, which a gateway links
// and which therefore links nothing of internal/, holds a generated copy
// of json.go with its names unexported (protocol/clip.go; protocol's
// TestClipIsTextclip keeps the two equal): a text quoted into a message
// is cut the same way by the parser of a step, the worker and its tools.
package textclip
