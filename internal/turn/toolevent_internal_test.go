package turn

import (
	"encoding/json"
	"strings"
	"testing"
)

// A tool's details that do not encode (a tool's bug) still give an event
// that publishes, saying why they are missing.
func TestDetailsThatDoNotEncode(t *testing.T) {
	d := details(map[string]any{"c": make(chan int)})
	var got map[string]string
	if err := json.Unmarshal(d, &got); err != nil || !strings.Contains(got["error"], "could not be encoded") {
		t.Fatalf("details %s (%v)", d, err)
	}
	if details(nil) != nil {
		t.Error("nil details became something")
	}
}
