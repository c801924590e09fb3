package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// scanSeeds are steps as gateways write them (each scanStep must take),
// then steps it may leave to json.Unmarshal.
var scanSeeds = []string{
	`{"agent_id":"load","turn_id":"r123456-42","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c0","name":"ping","arguments":"{}"}]}`,
	` { "agent_id" : "a1" , "turn_id" : "t1" , "step" : 12 , "context" : { "kind" : "workflow_task" , "workflow_id" : "w1" , "task_id" : "t-1" , "bindings" : { "web" : true , "brain" : false } } ,
	  "output" : [ { "id" : "msg_1" , "type" : "message" , "role" : "assistant" , "content" : [ { "type" : "output_text" , "text" : "I will \"look\" \u00e9\n" , "annotations" : [ ] } ] } ,
	  { "id" : "fc_1" , "type" : "function_call" , "status" : "completed" , "call_id" : "call_é" , "namespace" : "github" , "name" : "get" , "arguments" : "{\"path\":\"a\\\\b\",\"n\":[1,-2.5e+3,true,null]}" } ,
	  { "type" : "tool_search_call" , "call_id" : "s1" , "execution" : "client" , "arguments" : { "query" : "x" , "limit" : 3 } } , { "type" : "reasoning" , "summary" : [ ] , "encrypted_content" : null } ] }`,
	`{"agent_id":"a","turn_id":"t","step":-0,"context":{"kind":""},"output":[],"extra":{"a":[{},[],"",0,1.5E-7]}}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","bindings":{}},"output":[{"type":"function_call","arguments":null,"content":"x"}]}`,
	`{}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","skills":["a","b"],"mcp_servers":[]},"output":[]}`,
	// Left to json.Unmarshal.
	`{"agent_id":"a\u0031","turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}`,
	`{"Agent_ID":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","agent_id":"b","turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":null,"turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1.0,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1e2,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":99999999999999999999,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","approval":"all"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","Skills":["x"]},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","bindings":{"web":1}},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[null,5]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[{"type":"function_call","ſtep":1}]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}]`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[{"arguments":"\x01"}]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[{"arguments":"\u12"}]}`,
	`{"agent_id":"a","turn_id":"t","step":01,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"\xff","turn_id":"t","step":1,"context":{"kind":"text"},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text"},"output":[{"content":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}]}`,
	`null`, `[]`, ``, `{"step":`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","skills":["a",1]},"output":[]}`,
	`{"agent_id":"a","turn_id":"t","step":1,"context":{"kind":"text","skills":null},"output":[]}`,
}

// checkScan fails t unless scanStep, when it takes data, decodes it as
// json.Unmarshal does; it reports whether scanStep took it.
func checkScan(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := scanStep(data)
	if !ok {
		if !reflect.DeepEqual(got, stepWire{}) {
			t.Fatalf("scanStep(%s) left %+v with ok false", data, got)
		}
		return false
	}
	var want stepWire
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatalf("scanStep took %s, which json.Unmarshal refuses: %v", data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanStep(%s) = %+v; json.Unmarshal = %+v", data, got, want)
	}
	for _, it := range got.Output {
		if s, ok := plainString(it.Arguments); ok {
			var want string
			if err := json.Unmarshal(it.Arguments, &want); err != nil || s != want {
				t.Fatalf("plainString(%s) = %q; json.Unmarshal = %q, %v", it.Arguments, s, want, err)
			}
		}
	}
	return true
}

func TestScanStepIsUnmarshal(t *testing.T) {
	for i, s := range scanSeeds {
		if took := checkScan(t, []byte(s)); took != (i < 6) {
			t.Errorf("scanStep took %s: %v", s, took)
		}
	}
}

// FuzzScanStep: what scanStep takes, it decodes as json.Unmarshal does.
func FuzzScanStep(f *testing.F) {
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScan(t, data) })
}
