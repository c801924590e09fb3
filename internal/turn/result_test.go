package turn

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The journal stores duration_ms; a record an older worker stored, with
// "duration" in nanoseconds, still reads.
func TestOutcomeJSONDuration(t *testing.T) {
	data, err := json.Marshal(&Outcome{CallID: "c1", Name: "ping", Duration: 1500 * time.Millisecond, Item: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"duration_ms":1500`) || strings.Contains(string(data), `"duration":`) {
		t.Fatalf("marshalled %s, want duration_ms only", data)
	}
	var o Outcome
	if err := json.Unmarshal(data, &o); err != nil || o.Duration != 1500*time.Millisecond || o.CallID != "c1" || o.Name != "ping" {
		t.Fatalf("round trip: %+v, %v", o, err)
	}
	var old Outcome
	if err := json.Unmarshal([]byte(`{"call_id":"c2","name":"sleep","item":{},"duration":2000000000,"end_turn":true}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.Duration != 2*time.Second || old.CallID != "c2" || !old.EndTurn {
		t.Fatalf("old record: %+v", old)
	}
}

// A media outcome keeps its parts' notes in the journal, so that a
// replayed outcome's step.done can still say where left-out media are.
func TestOutcomeJSONMediaNotes(t *testing.T) {
	notes := []string{"", "[left out: an image/png image (3 KiB) from a.png in your home, because …]"}
	data, err := json.Marshal(&Outcome{CallID: "c1", Item: json.RawMessage(`{}`), More: &OutcomeMore{MediaNotes: notes}})
	if err != nil {
		t.Fatal(err)
	}
	var o Outcome
	if err := json.Unmarshal(data, &o); err != nil || len(o.MediaNotes()) != 2 || o.MediaNotes()[1] != notes[1] {
		t.Fatalf("round trip of %s: %+v, %v", data, o.MediaNotes(), err)
	}
	if data, _ := json.Marshal(&Outcome{CallID: "c1", Item: json.RawMessage(`{}`)}); strings.Contains(string(data), "media_notes") {
		t.Errorf("a text outcome's record has media notes: %s", data)
	}
}
