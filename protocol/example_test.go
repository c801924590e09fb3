package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentbull/toolruntime/protocol"
)

// A step as a gateway publishes it, read back as the workers do, and the
// names it travels under.
func Example() {
	body := []byte(`{"agent_id":"a1","turn_id":"t1","step":0,
		"context":{"kind":"text","bindings":{"diagnostics":true},"fairness":{"key":"tenant-42","weight":2}},
		"output":[{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{}"}]}`)
	subject := protocol.Subject(protocol.PrefixCall, "a1", "t1")
	st, err := protocol.ParseStep(protocol.PrefixCall, subject, body, 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(subject, protocol.StepMsgID(st.AgentID, st.TurnID, st.Step))
	fmt.Println(st.Context.Fairness.Key, len(st.Calls), st.Calls[0].Name)

	// Its events come on the turn's output subject.
	fmt.Println(protocol.Subject(protocol.PrefixOutput, "a1", "t1"), "in", protocol.StreamOutputs)

	// A call's output, as a gateway reads it.
	var out protocol.CallOutput
	_ = json.Unmarshal([]byte(`{"type":"call.output","call_id":"call_1","status":"error",
		"error":{"kind":"invalid_arguments","message":"note must be a string"}}`), &out)
	fmt.Println(out.Status, out.Error.Kind == protocol.InvalidArguments)
	// Output:
	// turn.call.a1.t1 a1.t1.0
	// tenant-42 1 ping
	// turn.call.output.a1.t1 in TURN_OUTPUTS
	// error true
}

// A gateway fills a Step's wire fields and publishes its JSON; ParseStep
// is the workers' reading of it. Its refusals wrap ErrMalformed, as
// gateway.Client.Send's do for a step it will not publish.
func ExampleStep() {
	st := protocol.Step{AgentID: "a1", TurnID: "t1", Step: 0, Context: protocol.Context{Kind: protocol.KindText},
		Output: []json.RawMessage{json.RawMessage(`{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{}"}`)}}
	body, _ := json.Marshal(st)
	fmt.Println(string(body))
	subject := protocol.Subject(protocol.PrefixCall, st.AgentID, st.TurnID)
	read, err := protocol.ParseStep(protocol.PrefixCall, subject, body, 1<<20)
	fmt.Println(read.Items, read.Calls[0].Type, read.Calls[0].Name, read.Calls[0].Arguments, err)

	st.Step = -1
	body, _ = json.Marshal(st)
	_, err = protocol.ParseStep(protocol.PrefixCall, subject, body, 1<<20)
	fmt.Println(errors.Is(err, protocol.ErrMalformed), err)
	// Output:
	// {"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text"},"output":[{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{}"}]}
	// 1 function_call ping {} <nil>
	// true malformed step: step -1 is negative
}
