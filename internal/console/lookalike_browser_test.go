package console_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
)

// TestBrowserLookalikes holds calls whose arguments look like other
// arguments (a Cyrillic а in rm -rf /tmp/а, fullwidth and mathematical
// letters, a decomposed é beside a precomposed one, stacked combining
// marks, Hangul fillers, U+180E, U+FEFF, line and paragraph separators,
// NEL, tabs, runs of two and three spaces, ligature pairs, a lone
// surrogate, which the worker refuses), an input request and a dead letter made of them, and has a
// person read them in Chromium on the list, the step's page, the live
// page, the dead letters and the audit table: no character outside
// printable ASCII may be drawn as it is (each is a marker that names
// it), every character of the held arguments is drawn inside the
// viewport's width, above its Approve, by no clipping or hiding style,
// with ligatures off and spaces kept; what the page showed reads back
// as exactly what ran.
func TestBrowserLookalikes(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	r := newRig(t)
	notes := map[string]string{
		"look": "rm -rf /tmp/\u0430 ; \uff52\uff4d -rf ~ ; cafe\u0301 caf\u00e9 x\u0336\u0336\u0336\u0336 a\u115fb\u3164c " +
			"d\u180ee\ufefff g\u2028h\u2029i\u0085j \U0001d42b\U0001d426 \u01c3 \u2044 \u05d0/../k \u27e6U+0020 SPACE\u27e7",
		"ws": "a\tb  c   d\t\te ; a -> b != c === d fi ffi www <= >= :: ||",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	runs := map[string]*gateway.StepRun{}
	send := func(turn, args string) {
		run, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: turn, Step: 0, Context: diagCtx,
			Output: []json.RawMessage{fc("c1", "ping", args)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Close)
		if _, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		}
		runs[turn] = run
	}
	for turn, note := range notes {
		args, _ := json.Marshal(map[string]string{"note": note})
		send(turn, string(args))
	}
	// A lone surrogate never reaches a person: the worker refuses the
	// call's arguments before it could be held.
	surr, err := r.gw.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "surr", Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "ping", `{"note":"x\ud800y"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(surr.Close)
	if ev, err := surr.Next(ctx); err != nil {
		t.Fatal(err)
	} else if o, ok := ev.(*protocol.CallOutput); !ok || o.Error == nil || o.Error.Kind != "invalid_arguments" || !strings.Contains(o.Error.Message, "lone UTF-16 surrogate") {
		t.Fatalf("a lone surrogate: %#v", ev)
	}

	// An input request (protocol 1.3) whose message, arguments and
	// options are look-alikes.
	js := r.srv.JetStream(t)
	kv, err := js.KeyValue(ctx, protocol.BucketState)
	if err != nil {
		t.Fatal(err)
	}
	inArgs := json.RawMessage("{\"path\":\"/tmp/\u0430\",\"mode\":\"\uff52\uff57\"}")
	schema := json.RawMessage(`{"type":"object","properties":{"ok":{"type":"string","title":"Proceed with /tmp/\u0430?","enum":["yes","y\u0435s"]}},"required":["ok"]}`)
	p := turn.PendingStep{AgentID: "a1", TurnID: "in1", Step: 0, State: turn.StatePending, ExpiresAt: time.Now().Add(time.Hour).UTC(),
		Calls: []turn.HeldCall{{Type: protocol.ItemFunctionCall, CallID: "c1", Namespace: "files", Name: "delete", Valid: inArgs,
			Approval: protocol.PendingInput, Input: &turn.InputHold{Request: protocol.InputRequest{Message: "Delete /tmp/\u0430\u202e?", RequestedSchema: schema},
				Arguments: inArgs, Round: 1, Live: true}}}}
	b, _ := json.Marshal(p)
	if _, err := kv.Create(ctx, "approval.a1.in1.0", b); err != nil {
		t.Fatal(err)
	}
	// A malformed step made of look-alikes, dead-lettered by the worker.
	if _, err := js.Publish(ctx, "turn.call.a1.bad", []byte("not a step: rm -rf /tmp/\u0430 \u202e \uff52\uff4d")); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		t.Fatal(err)
	}
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs > 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	outb := runBrowser(ctx, t, "lookalike.mjs", r.url, npmDir, chromium)
	type measured struct {
		Chars, Undrawn, Outside, HiddenByStyle, Clippers, ArgsBelowApprove int
		Samples                                                            []string
	}
	var out struct {
		Shown      map[string]string
		Leaks      map[string][]string
		Measure    map[string]measured
		Styles     struct{ Ligatures, Features, LnSpace, VisSpace string }
		ScriptNote string
		Flashes    []string
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	for where, l := range out.Leaks {
		if len(l) > 0 {
			t.Errorf("%s: characters drawn as they are, not named: U+%v", where, l)
		}
	}
	for where, m := range out.Measure {
		t.Logf("%s: %d characters of held arguments measured", where, m.Chars)
		if m.Chars < 100 || m.Undrawn+m.Outside+m.HiddenByStyle+m.Clippers+m.ArgsBelowApprove > 0 {
			t.Errorf("%s: %+v", where, m)
		}
	}
	if out.Styles.Ligatures != "none" || out.Styles.LnSpace != "break-spaces" || out.Styles.VisSpace != "break-spaces" {
		t.Errorf("styles %+v", out.Styles)
	}
	if !strings.Contains(out.ScriptNote, "Cyrillic") || !strings.Contains(out.ScriptNote, "several scripts") {
		t.Errorf("the mixed-script warning: %q", out.ScriptNote)
	}
	for where, want := range map[string][]string{
		"step":  {"⟦U+0430 CYRILLIC SMALL LETTER A а⟧", "⟦U+0301 COMBINING ACUTE ACCENT⟧", "⟦U+00E9 LATIN SMALL LETTER E WITH ACUTE é⟧"},
		"input": {"⟦U+0430 CYRILLIC SMALL LETTER A а⟧", "⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧", "⟦U+FF52 FULLWIDTH LATIN SMALL LETTER R ｒ⟧", "⟦U+0435 CYRILLIC SMALL LETTER IE е⟧"},
		"live":  {"⟦U+0430 CYRILLIC SMALL LETTER A а⟧", "⟦U+2028 LINE SEPARATOR⟧"},
		"dead":  {"⟦U+0430 CYRILLIC SMALL LETTER A а⟧", "⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧"},
		"ws":    {"a⟦U+0009 CHARACTER TABULATION⟧b  c   d⟦2 × U+0009 CHARACTER TABULATION⟧e", "a -> b != c === d fi ffi www"},
	} {
		for _, w := range want {
			if !strings.Contains(out.Shown[where], w) {
				t.Errorf("%s lacks %q: %.2000q", where, w, out.Shown[where])
			}
		}
	}
	for _, f := range out.Flashes {
		if !strings.Contains(f, "Your decision decided") {
			t.Errorf("flash %q", f)
		}
	}
	for turn, note := range notes {
		var v struct{ Note string }
		if err := json.Unmarshal([]byte(unmark(out.Shown[turn])), &v); err != nil {
			t.Errorf("%s: the shown text %q does not read back as JSON: %v", turn, out.Shown[turn], err)
		} else if v.Note != note {
			t.Errorf("%s: the page showed %q, read back %q; what runs is %q", turn, out.Shown[turn], v.Note, note)
		}
		done, err := runs[turn].Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var item struct{ Output string }
		_ = json.Unmarshal(done.Items[0], &item)
		if item.Output != "pong "+note {
			t.Errorf("%s ran with another value: %.200q", turn, item.Output)
		}
	}
}
