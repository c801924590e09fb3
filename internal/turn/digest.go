package turn

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"

	"github.com/agentbull/toolruntime/protocol"
)

// CallDigest identifies what a call asks for: its type, namespace, name
// and raw arguments. The journal stores it with a call's claim, so that a
// call id used again in a re-sent step for a different call is told apart
// from a redelivery of the same call (docs/protocol.md, "Size limits"
// and "Reused call ids").
func CallDigest(c protocol.CallItem) string {
	h := sha256.New()
	for _, s := range []string{c.Type, c.Namespace, c.Name, c.Arguments, string(c.Search)} {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// StepDigest identifies a step's calls (ids and digests, in order): the
// version of a step number that a gateway re-sent with other calls.
func StepDigest(st *protocol.Step) string {
	h := sha256.New()
	for _, c := range st.Calls {
		h.Write([]byte(strconv.Itoa(len(c.CallID))))
		h.Write([]byte{':'})
		h.Write([]byte(c.CallID))
		h.Write([]byte(CallDigest(c)))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}
