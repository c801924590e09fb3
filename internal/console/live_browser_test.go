package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// noteRe matches a note on a number: it stands for nothing.
var noteRe = regexp.MustCompile(`⟦not exact as a 64-bit number: read as [^⟧]*⟧`)

// hostileEvents are a call.output and an activity whose bytes attack
// the person reading the live page: numbers a 64-bit float reads as
// others (a browser's JSON.parse among them), a stack of 300 combining
// marks, bidi overrides and isolates, zero-width and tag characters, a
// lone surrogate escape, 120 newlines and a 6,000-byte token.
func hostileEvents() (output, activity []byte) {
	str := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	output = []byte(`{"type":"call.output","call_id":` + str("c\u202e1\u2067x\u2069") + `,"namespace":` + str("ns\u200b") +
		`,"name":` + str("run\U000E0041") + `,"status":"ok","step":12345678901234567890,"duration_ms":1e400,"output":{"neg":-0.0,` +
		`"tiny":0.1000000000000000000000001,"big":12345678901234567890,"inf":1e400,"zalgo":` + str("e"+zalgo(300)+"cho") +
		`,"lone":"x\ud800y","lines":` + str("a"+strings.Repeat("\n", 120)+"b") + `,"token":` + str(strings.Repeat("T0k", 2000)) +
		`,"bidi":` + str("\u202eabc\u202c \u2067d\u2069 \u200bz\U000E0041\U000E0042") + `}}`)
	activity = []byte(`{"state":"running","call_id":"c2","name":"probe","label":` + str("go\u202e\u200b\U000E0041"+"x"+zalgo(5)) +
		`,"progress":{"done":12345678901234567890,"total":1e400},"detail":` + str("e"+zalgo(300)+"cho") + `}`)
	return output, activity
}

// TestBrowserLiveShowsTheBytes publishes hostile events on the live
// page's subjects and reads the page in Chromium: every row reads back
// (markers as what they name, notes left out) as the bytes the event
// carried, numbers spelled as they were (12345678901234567890, not the
// 12345678901234567000 a browser's JSON.parse makes of it; -0.0, not 0;
// 1e400, not null) with their notes, every hidden character and the
// lone surrogate named, the stack of marks counted, and nothing outside
// printable ASCII drawn as it is.
func TestBrowserLiveShowsTheBytes(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	r := newRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	output, activity := hostileEvents()
	js := r.srv.JetStream(t)
	if _, err := js.Publish(ctx, "turn.call.output.hl.t1", output); err != nil {
		t.Fatal(err)
	}
	// An activity is not stored: it is published until the page has
	// read it.
	nc := r.srv.Connect(t)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			_ = nc.Publish("turn.activity.hl.t1", activity)
			select {
			case <-done:
				return
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	outb := runBrowser(ctx, t, "live.mjs", r.url, npmDir, chromium)
	var out struct {
		Rows []struct {
			Cls   string
			Cells []string
			JSON  string
		}
		Leaks []string
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	if len(out.Leaks) > 0 {
		t.Errorf("characters drawn as they are, not named: U+%v", out.Leaks)
	}
	seen := map[string]bool{}
	for _, row := range out.Rows {
		src := strings.Fields(row.Cls)[0]
		if seen[src] {
			continue
		}
		seen[src] = true
		want, cells := output, map[int]string{
			1: "12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧",
			2: "call.output",
			3: "c⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧1⟦U+2067 RIGHT-TO-LEFT ISOLATE⟧x⟦U+2069 POP DIRECTIONAL ISOLATE⟧",
			4: "ns⟦U+200B ZERO WIDTH SPACE⟧.run⟦U+E0041 TAG LATIN CAPITAL LETTER A⟧",
			5: "ok · 1e400⟦not exact as a 64-bit number: read as +Inf⟧ ms",
		}
		marks := []string{"-0.0,", "0.1000000000000000000000001⟦not exact as a 64-bit number: read as 0.1⟧",
			"12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧",
			"1e400⟦not exact as a 64-bit number: read as +Inf⟧", "e⟦300 combining marks on one character: U+0300 COMBINING GRAVE ACCENT; U+0301",
			"x⟦U+D800 LONE SURROGATE, not a character⟧y", "a⟦120 × U+000A LINE FEED⟧b", strings.Repeat("T0k", 2000),
			"⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧abc⟦U+202C POP DIRECTIONAL FORMATTING⟧ ⟦U+2067 RIGHT-TO-LEFT ISOLATE⟧d⟦U+2069 POP DIRECTIONAL ISOLATE⟧ ⟦U+200B ZERO WIDTH SPACE⟧z⟦U+E0041 TAG LATIN CAPITAL LETTER A⟧⟦U+E0042 TAG LATIN CAPITAL LETTER B⟧"}
		if src == "activity" {
			want, cells = activity, map[int]string{
				2: "activity",
				3: "c2",
				4: "probe",
				5: "running: go⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧⟦U+200B ZERO WIDTH SPACE⟧⟦U+E0041 TAG LATIN CAPITAL LETTER A⟧x⟦5 combining marks on one character: U+0300 COMBINING GRAVE ACCENT; U+0301",
			}
			marks = []string{"12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧",
				"1e400⟦not exact as a 64-bit number: read as +Inf⟧", "e⟦300 combining marks on one character: U+0300 COMBINING GRAVE ACCENT; U+0301"}
		}
		if len(row.Cells) != 6 {
			t.Fatalf("%s: cells %q", src, row.Cells)
		}
		for i, w := range cells {
			if !strings.HasPrefix(row.Cells[i], w) {
				t.Errorf("%s: cell %d is %.300q, want %.300q", src, i, row.Cells[i], w)
			}
		}
		if !strings.HasSuffix(row.Cells[5], "(12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧ of 1e400⟦not exact as a 64-bit number: read as +Inf⟧)") && src == "activity" {
			t.Errorf("activity: progress %.300q", row.Cells[5])
		}
		for _, m := range marks {
			if !strings.Contains(row.JSON, m) {
				t.Errorf("%s: the JSON lacks %.200q: %.3000q", src, m, row.JSON)
			}
		}
		// Read back: the JSON shown, its markers as what they name (a
		// lone surrogate as its escape), is the event's value, its
		// numbers spelled as they were.
		back := noteRe.ReplaceAllString(row.JSON, "")
		back = strings.ReplaceAll(back, "⟦U+D800 LONE SURROGATE, not a character⟧", `\ud800`)
		back = unmark(back)
		if got, exp := decodeExact(t, []byte(back)), decodeExact(t, want); !reflect.DeepEqual(got, exp) {
			t.Errorf("%s: the page reads back as\n%.3000q\nthe event carried\n%.3000q", src, back, want)
		}
	}
	if !seen["output"] || !seen["activity"] {
		t.Errorf("rows seen: %v", seen)
	}
}

// decodeExact decodes JSON with its numbers as they are spelled.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Errorf("%.300q does not decode: %v", b, err)
	}
	return v
}
