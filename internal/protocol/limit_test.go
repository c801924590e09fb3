package protocol_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/tools"
)

// encoded is the length of s inside a JSON string.
func encoded(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}

func TestClipText(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
	}{
		{"short", "hello", 100},
		{"ascii", strings.Repeat("a", 10000), 1000},
		{"escapes", strings.Repeat("<\n\"&\x01", 5000), 1000},
		{"multibyte", strings.Repeat("日本語", 5000), 999},
		{"invalid utf-8", strings.Repeat("\xff\xfe", 5000), 500},
		{"separators", strings.Repeat("\u2028x", 5000), 700},
		{"tiny budget", strings.Repeat("a", 10000), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := protocol.ClipText(c.s, c.n)
			if encoded(c.s) <= c.n {
				if got != c.s {
					t.Fatalf("text that fits was changed")
				}
				return
			}
			if !strings.Contains(got, "bytes left out") {
				t.Fatalf("no note: %q", got)
			}
			if c.n >= 64 && encoded(got) > c.n {
				t.Errorf("encoded %d bytes, over %d", encoded(got), c.n)
			}
			if utf8.ValidString(c.s) && !utf8.ValidString(got) {
				t.Errorf("a character was cut")
			}
		})
	}
	got := protocol.ClipText("HEAD"+strings.Repeat("x", 10000)+"TAIL", 200)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") {
		t.Errorf("head or tail lost: %q", got)
	}
}

func TestClipList(t *testing.T) {
	list := make([]string, 1000)
	for i := range list {
		list[i] = fmt.Sprint("note ", i, strings.Repeat("!", i))
	}
	got := protocol.ClipList(list, 10, 50)
	if len(got) != 11 || got[10] != "and 990 more" {
		t.Fatalf("got %d items, last %q", len(got), got[len(got)-1])
	}
	for _, s := range got {
		if encoded(s) > 50 {
			t.Errorf("item of %d bytes", encoded(s))
		}
	}
	short := []string{"a", "b"}
	if got := protocol.ClipList(short, 10, 50); len(got) != 2 {
		t.Errorf("short list changed: %v", got)
	}
}

func TestCallOutputFit(t *testing.T) {
	text := "HEAD" + strings.Repeat("y", 3<<20) + "TAIL"
	ev := &protocol.CallOutput{
		Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c1", Name: "n",
		Status: protocol.StatusError, Error: &tools.Error{Kind: tools.ToolError, Message: text},
		Item:    mustItem("c1", "Error (tool_error): "+text),
		Details: map[string]string{"big": text},
		Events:  []tools.Event{{Type: "e", Data: text}, {Type: "e", Data: text}},
		Repairs: make([]string, 500),
	}
	const budget = 1 << 20
	if err := ev.Fit(budget); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	if len(data) > budget {
		t.Fatalf("%d bytes after Fit(%d)", len(data), budget)
	}
	var item protocol.FunctionCallOutput
	if err := json.Unmarshal(ev.Item, &item); err != nil || !strings.HasSuffix(item.Output, "TAIL") || !strings.Contains(item.Output, "bytes left out") {
		t.Errorf("item %.200s (%v)", ev.Item, err)
	}
	if d, ok := ev.Details.(protocol.DroppedDetails); !ok || !d.Dropped || d.Bytes < 3<<20 {
		t.Errorf("details %v", ev.Details)
	}
	if last := ev.Events[len(ev.Events)-1]; last.Type != "clipped" {
		t.Errorf("events end with %v", last)
	}
	if ev.Repairs[len(ev.Repairs)-1] != "and 480 more" {
		t.Errorf("repairs end with %q", ev.Repairs[len(ev.Repairs)-1])
	}
}

func TestStepDoneFitSharesFairly(t *testing.T) {
	var items []json.RawMessage
	for i := range 30 {
		items = append(items, mustItem(fmt.Sprint("small", i), "ok"))
	}
	for i := range 5 {
		items = append(items, mustItem(fmt.Sprint("large", i), strings.Repeat("z", 100<<10)))
	}
	ev := &protocol.StepDone{Type: protocol.EventStepDone, AgentID: "a", TurnID: "t", Items: items}
	const budget = 200 << 10
	if err := ev.Fit(budget); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(ev)
	if len(data) > budget || len(ev.Items) != 35 {
		t.Fatalf("%d bytes, %d items", len(data), len(ev.Items))
	}
	for i, it := range ev.Items {
		var fo protocol.FunctionCallOutput
		_ = json.Unmarshal(it, &fo)
		switch {
		case i < 30 && fo.Output != "ok":
			t.Errorf("small item %d changed: %q", i, fo.Output)
		case i >= 30 && (!strings.Contains(fo.Output, "bytes left out") || len(it) < 30<<10):
			t.Errorf("large item %d: %d bytes", i, len(it))
		}
	}
	// Too many items for any step.done.
	many := &protocol.StepDone{Type: protocol.EventStepDone, Items: items}
	if err := many.Fit(1000); err == nil {
		t.Error("35 items fit 1000 bytes")
	}
}

func mustItem(callID, text string) json.RawMessage {
	b, _ := json.Marshal(protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID, Output: text})
	return b
}

func FuzzClipText(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("<&>\n", 100), 80)
	f.Add("\xff\u2028日本", 40)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := protocol.ClipText(s, n)
		if encoded(s) <= n {
			if got != s {
				t.Fatalf("text that fits was changed")
			}
			return
		}
		if n >= 64 && encoded(got) > n {
			t.Fatalf("ClipText(%q, %d) encodes to %d bytes", s, n, encoded(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("a character was cut: %q", got)
		}
	})
}

func FuzzStepDoneFit(f *testing.F) {
	f.Add([]byte(`{"type":"function_call_output","call_id":"c","output":"x"}`), 3, 200)
	f.Add([]byte(`{"type":"tool_search_output","call_id":"c","tools":[]}`), 10, 300)
	f.Fuzz(func(t *testing.T, item []byte, copies, budget int) {
		if !json.Valid(item) || copies < 0 || copies > 50 || budget < 0 || budget > 1<<20 {
			return
		}
		ev := &protocol.StepDone{Type: protocol.EventStepDone}
		for range copies {
			ev.Items = append(ev.Items, json.RawMessage(item))
		}
		if err := ev.Fit(budget); err != nil {
			return
		}
		data, err := json.Marshal(ev)
		if err != nil || len(data) > budget && len(ev.Items) > 0 {
			t.Fatalf("Fit(%d) left %d bytes (%v)", budget, len(data), err)
		}
		if len(ev.Items) != copies {
			t.Fatalf("%d items, want %d", len(ev.Items), copies)
		}
	})
}

func FuzzCallOutputFit(f *testing.F) {
	f.Add("output text", "message", "details", 400)
	f.Add(strings.Repeat("<>&\n", 500), strings.Repeat("m", 3000), strings.Repeat("d", 5000), 2000)
	f.Fuzz(func(t *testing.T, text, message, details string, budget int) {
		if budget < 0 || budget > 1<<20 {
			return
		}
		ev := &protocol.CallOutput{
			Type: protocol.EventCallOutput, AgentID: "a", TurnID: "t", CallID: "c", Name: "n",
			Status: protocol.StatusError, Error: &tools.Error{Kind: tools.ToolError, Message: message},
			Item: mustItem("c", text), Details: details, Events: []tools.Event{{Type: "e", Data: details}}, Repairs: []string{details},
		}
		if err := ev.Fit(budget); err != nil {
			return
		}
		data, err := json.Marshal(ev)
		if err != nil || len(data) > budget {
			t.Fatalf("Fit(%d) left %d bytes (%v)", budget, len(data), err)
		}
		var item protocol.FunctionCallOutput
		if err := json.Unmarshal(ev.Item, &item); err != nil || item.CallID != "c" {
			t.Fatalf("item %s (%v)", ev.Item, err)
		}
	})
}
