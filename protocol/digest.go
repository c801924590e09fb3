package protocol

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
)

// CallDigest identifies what a call asks for: its type, namespace, name
// and raw arguments. The journal stores it with a call's claim, so that a
// call id used again in a re-sent step for a different call is told apart
// from a redelivery of the same call (docs/protocol.md, "Size limits"
// and "Reused call ids").
func CallDigest(c CallItem) string {
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
func StepDigest(st *Step) string {
	h := sha256.New()
	for _, c := range st.Calls {
		h.Write([]byte(strconv.Itoa(len(c.CallID))))
		h.Write([]byte{':'})
		h.Write([]byte(c.CallID))
		h.Write([]byte(CallDigest(c)))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// versioned is the step token of an event's message id: the step
// number, and for a re-sent version of it "~" and the version. No plain
// step number has a "~", so versioned ids never collide with the first
// version's.
func versioned(agentID, turnID string, step int64, version string) string {
	id := StepMsgID(agentID, turnID, step)
	if version != "" {
		id += "~" + version
	}
	return id
}

// MsgID is the event's Nats-Msg-Id: CallOutputMsgID, with the step token
// versioned when Version is set.
func (ev *CallOutput) MsgID() string {
	if ev.Version == "" {
		return CallOutputMsgID(ev.AgentID, ev.TurnID, ev.Step, ev.CallID)
	}
	return versioned(ev.AgentID, ev.TurnID, ev.Step, ev.Version) + "." + callToken(ev.CallID)
}

// MsgID is the event's Nats-Msg-Id: StepDoneMsgID, with the step token
// versioned when Version is set.
func (ev *StepDone) MsgID() string {
	return versioned(ev.AgentID, ev.TurnID, ev.Step, ev.Version) + ".done"
}
