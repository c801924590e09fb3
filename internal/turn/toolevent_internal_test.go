package turn

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbull/toolruntime/tool"
)

// A tool's details that do not encode (a tool's bug) still give an event
// that publishes, saying why they are missing; events keep their types.
func TestDetailsThatDoNotEncode(t *testing.T) {
	d := details(map[string]any{"c": make(chan int)})
	var got map[string]string
	if err := json.Unmarshal(d, &got); err != nil || !strings.Contains(got["error"], "could not be encoded") {
		t.Fatalf("details %s (%v)", d, err)
	}
	if details(nil) != nil || events(nil) != nil {
		t.Error("nil details or events became something")
	}
	evs := events([]tool.PresentationEvent{{Type: "a", Data: 1}, {Type: "b"}})
	if string(evs[0].Data) != "1" || evs[1].Data != nil {
		t.Errorf("events %+v", evs)
	}
	if back := toolEvents(evs); back[0].Type != "a" || back[1].Data != nil {
		t.Errorf("back %+v", back)
	}
}
