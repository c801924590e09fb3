package protocol

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
)

// DecisionDigest binds a decision to the exact call it decides: a digest
// of the call's id, namespace, name and arguments as step.pending carries
// them (the validated value that runs). A gateway or console that shows
// the arguments to a person sends the digest of what it showed in the
// decision's digest field; the worker compares it with the digest of the
// call it holds and refuses an answer that decided something else
// (docs/worker.md, "Approvals").
//
// The arguments are read as JSON compacted with <, >, &, U+2028 and
// U+2029 escaped, the form the worker publishes, so that the digest of
// step.pending's arguments and of the stored record agree whichever of
// the two equivalent spellings a reader holds; bytes that are not JSON
// are taken as they are.
func DecisionDigest(callID, namespace, name string, arguments json.RawMessage) string {
	return digestOf([]byte(callID), []byte(namespace), []byte(name), canonicalArgs(arguments))
}

// canonicalArgs is arguments compacted with <, >, &, U+2028 and U+2029
// escaped, or the bytes as they are when they are not JSON.
func canonicalArgs(arguments json.RawMessage) []byte {
	var c, e bytes.Buffer
	if json.Compact(&c, arguments) != nil {
		return arguments
	}
	json.HTMLEscape(&e, c.Bytes())
	return e.Bytes()
}

// digestOf is the sha256 of parts, each prefixed by its length, in the
// form "sha256:" and 43 base64url characters.
func digestOf(parts ...[]byte) string {
	h := sha256.New()
	for _, s := range parts {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write(s)
	}
	return "sha256:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// validDigest reports whether s has DecisionDigest's form.
func validDigest(s string) bool {
	b, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(b) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(b)
	return err == nil
}
