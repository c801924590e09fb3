package protocol

import "strconv"

// Size limits (docs/protocol.md, "Size limits"). Every event the worker
// publishes must fit the server's max payload, which the connection
// reports; the budget of an event's body is that minus its headers and a
// margin.
const (
	// HeaderRoom is what EventBudget leaves for an event's headers (its
	// message id is at most ~420 bytes, trace context ~600) and for the
	// few bytes a journal record adds around an outcome.
	HeaderRoom = 4 << 10
	// Margin is left below the max payload after the exact headers, so
	// that a server whose limit counts a few bytes differently still
	// takes the message.
	Margin = 256
)

// EventBudget is the largest body of an event on a connection whose max
// payload is maxPayload, before the event's exact headers are known.
func EventBudget(maxPayload int64) int {
	return max(int(maxPayload)-HeaderRoom-Margin, 1<<10)
}

// MinStepDoneBytes is the smallest step.done st can have: every output
// item clipped to a note (the worker's wire.FitStepDone). A step whose
// floor is over the budget cannot be answered and is refused before
// anything runs.
func MinStepDoneBytes(st *Step) int {
	// The step.done without items, as json.Marshal writes it; counted,
	// not encoded: this runs for every step.
	var digits [20]byte
	n := len(`{"type":"`+EventStepDone+`","agent_id":"","turn_id":"","step":,"items":[],"end_turn":false,"complete_actor_event":false,"task":null}`) +
		encodedLen(st.AgentID) + encodedLen(st.TurnID) + len(strconv.AppendInt(digits[:0], st.Step, 10))
	// An output's note is counted for an output of up to a MiB: one
	// larger has a digit more in its note, which the margin covers.
	fo := len(`{"type":"function_call_output","call_id":"","output":""}`) + leftOutLen(1<<20)
	ts := len(`{"type":"tool_search_output","call_id":"","execution":"client","status":"completed","tools":[]}`)
	for _, c := range st.Calls {
		n += encodedLen(c.CallID) + 1
		if c.Type == ItemToolSearchCall {
			n += ts
		} else {
			n += fo
		}
	}
	return n
}
