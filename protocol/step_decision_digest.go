package protocol

import (
	"encoding/json"
	"strconv"
)

// StepDecisionDigest binds a decision to the call it decides and to the
// hold it answers: DecisionDigest's call id, namespace, name and
// arguments, and also the agent, turn and step the call is held in and
// the hold's round (1 for a step's first hold; one more each time a
// resumed call's server asks again: the record's round, at least 1). It
// has DecisionDigest's form, so a decision carries it in the same
// digest field; the two never coincide (this one hashes a tag first).
//
// A worker that stores "step_digest": true in a pending step's record
// accepts either digest for its calls; one that does not knows only
// DecisionDigest and refuses this one (the step stays held). A decision
// with this digest cannot be replayed on another agent's, turn's or
// step's call with the same id and arguments, nor answer a later
// round's question of the same call (docs/worker.md, "Approvals").
func StepDecisionDigest(agentID, turnID string, step int64, round int, callID, namespace, name string, arguments json.RawMessage) string {
	return digestOf([]byte("step-decision/1"), []byte(agentID), []byte(turnID), []byte(strconv.FormatInt(step, 10)),
		[]byte(strconv.Itoa(max(round, 1))), []byte(callID), []byte(namespace), []byte(name), canonicalArgs(arguments))
}
