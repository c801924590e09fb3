package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentbull/toolruntime/protocol"
)

// runBrowser runs the browser script testdata/script against the console
// at url (with the test's token, a directory for its screenshots, and
// env beside them; a later value of a name wins) and returns what it
// printed.
func runBrowser(ctx context.Context, t *testing.T, script, url, npmDir, chromium string, env ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "testdata/"+script)
	cmd.Env = append(os.Environ(), "CONSOLE_URL="+url, "CONSOLE_TOKEN="+testToken, "CONSOLE_SHOTS="+t.TempDir(),
		"CONSOLE_NPM_DIR="+npmDir, "CONSOLE_CHROMIUM="+chromium)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser script %s: %v\n%s", script, err, out)
	}
	return out
}

// browserTools finds Chromium and playwright-core (in CONSOLE_NPM_DIR,
// else ~/.cache/toolruntime/console-npm, where scripts/test-deps.sh
// installs it), or says what is missing: CONSOLE_BROWSER_REQUIRED=1 (set
// by .ci/run) makes that a failure instead of a skip.
func browserTools(t *testing.T) (chromium, npmDir string) {
	t.Helper()
	npmDir = os.Getenv("CONSOLE_NPM_DIR")
	if npmDir == "" {
		cache, err := os.UserCacheDir()
		if err == nil {
			npmDir = filepath.Join(cache, "toolruntime", "console-npm")
		}
	}
	var missing []string
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node (Node.js 20 or later)")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		missing = append(missing, "chromium")
	}
	if _, err := os.Stat(filepath.Join(npmDir, "node_modules", "playwright-core")); err != nil {
		missing = append(missing, "playwright-core 1.65.1 in "+npmDir)
	}
	if len(missing) > 0 {
		msg := "browser test needs " + strings.Join(missing, ", ") +
			": scripts/test-deps.sh installs them (playwright-core into CONSOLE_NPM_DIR when it is set)"
		if os.Getenv("CONSOLE_BROWSER_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return chromium, npmDir
}

// TestBrowser drives the console in Chromium against a real worker: the
// login, a held call approved through the page with its output seen
// arriving on the live page, hostile arguments rendered inert, requests
// without the token or the CSRF token or from another origin refused,
// and a screenshot of every page (into docs/console with
// CONSOLE_UPDATE_SCREENSHOTS=1).
func TestBrowser(t *testing.T) {
	t.Parallel()
	chromium, npmDir := browserTools(t)
	r := newRig(t)
	run := r.hold(t, "a1", "t1")

	// A second held step, with a long value to fold.
	long, _ := json.Marshal(map[string]string{"note": strings.Repeat("a long note the model wrote; ", 20)})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	run2, err := r.gw.Send(ctx, protocol.Step{AgentID: "a2", TurnID: "deploy-7", Step: 3, Context: diagCtx,
		Output: []json.RawMessage{fc("call_9", "ping", string(long)), fc("call_10", "sleep", `{"ms":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	defer run2.Close()
	if _, err := run2.Next(ctx); err != nil {
		t.Fatal(err)
	}
	// A malformed step, dead-lettered by the worker, with markup in it.
	js := r.srv.JetStream(t)
	if _, err := js.Publish(ctx, "turn.call.a1.bad", []byte(`this is not a step <img src=x onerror=alert(3)>`)); err != nil {
		t.Fatal(err)
	}
	// A dead letter as the delivery-limit watch writes it, so that the
	// page shows its re-drive button (the handler test re-drives one).
	dl := nats.NewMsg("turn.dead.a3.t1")
	dl.Data = []byte(`{"agent_id":"a3","turn_id":"t1","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"c1","name":"ping","arguments":"{}"}]}`)
	dl.Header.Set("Dead-Reason", "delivery limit reached: delivered 5 times, never acknowledged")
	dl.Header.Set("Dead-Subject", "turn.call.a3.t1")
	dl.Header.Set("Dead-Stream", "TURN_CALLS")
	dl.Header.Set("Dead-Stream-Seq", "42")
	dl.Header.Set("Dead-Nats-Msg-Id", "a3.t1.0")
	if _, err := js.PublishMsg(ctx, dl); err != nil {
		t.Fatal(err)
	}
	// Some finished steps for the fleet's charts.
	for i := range 5 {
		if _, err := r.gw.Send(ctx, protocol.Step{AgentID: "a4", TurnID: fmt.Sprintf("t%d", i), Step: 0, Context: diagCtx,
			Output: []json.RawMessage{fc("c1", "sleep", `{"ms":20}`)}}); err != nil {
			t.Fatal(err)
		}
	}

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id=f method=post action="%s/approvals/decide"><input name=agent_id value=a1><input name=turn_id value=t1><input name=step value=0><input name="call.0" value=c1><input name="decision.0" value=approve><input name="call.1" value=c2><input name="decision.1" value=approve><input name=csrf value=guess></form><script>document.getElementById("f").submit()</script>`, r.url)
	}))
	defer evil.Close()

	// Screenshots go to a temporary directory, so that a test run leaves
	// the checkout as it was; CONSOLE_UPDATE_SCREENSHOTS=1 writes the
	// committed ones in docs/console.
	shots := t.TempDir()
	if os.Getenv("CONSOLE_UPDATE_SCREENSHOTS") != "" {
		var err error
		if shots, err = filepath.Abs(filepath.Join("..", "..", "docs", "console")); err != nil {
			t.Fatal(err)
		}
	}
	outb := runBrowser(ctx, t, "browser.mjs", r.url, npmDir, chromium, "CONSOLE_SHOTS="+shots, "CONSOLE_EVIL_URL="+evil.URL)
	var out struct {
		Dialogs                                 []string
		UnauthStatus, UnauthAPIStatus           int
		UnauthShowsCall                         bool
		ImgElements, ScriptElements, DeadImg    int
		ArgsText, Flash, LiveText, Recent       string
		DeadText, FleetText                     string
		NoCSRFStatus, CrossSiteStatus, LiveRows int
		RejectChecked                           bool
	}
	if err := json.Unmarshal(outb, &out); err != nil {
		t.Fatalf("browser script output %q: %v", outb, err)
	}
	check := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Errorf(format, args...)
		}
	}
	check(out.UnauthStatus == 401 && !out.UnauthShowsCall, "without a session: status %d, shows the call %v", out.UnauthStatus, out.UnauthShowsCall)
	check(out.UnauthAPIStatus == 401, "live stream without a session: %d", out.UnauthAPIStatus)
	check(len(out.Dialogs) == 0, "alerts ran: %v", out.Dialogs)
	check(out.ImgElements == 0 && out.DeadImg == 0, "img elements injected: approvals %d, dead letters %d", out.ImgElements, out.DeadImg)
	check(out.ScriptElements == 1, "%d script elements, want the console's one", out.ScriptElements)
	check(strings.Contains(out.ArgsText, `<img src=x onerror=alert(1)></script><script>alert(2)</script>`), "arguments not shown as text: %q", out.ArgsText)
	check(out.NoCSRFStatus == 403, "action without CSRF: %d, want 403", out.NoCSRFStatus)
	check(out.CrossSiteStatus == 403, "cross-site action: %d, want 403", out.CrossSiteStatus)
	check(out.RejectChecked, "typing a reason did not choose reject")
	check(strings.Contains(out.Flash, "Your decision decided step 0 of a1/t1"), "flash %q", out.Flash)
	check(strings.Contains(out.LiveText, "step.done") && strings.Contains(out.LiveText, "call.output"), "live page: %q", out.LiveText)
	check(strings.Contains(out.Recent, "Ada Operator"), "recent decisions lack the operator: %q", out.Recent)
	check(strings.Contains(out.DeadText, "<img src=x onerror=alert(3)>") && strings.Contains(out.DeadText, "Re-drive"), "dead letters page: %q", out.DeadText)
	check(strings.Contains(out.FleetText, "TURN_CALLS") && strings.Contains(out.FleetText, "turn-workers"), "fleet page: %q", out.FleetText)

	done, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check(len(done.Items) == 2 && strings.Contains(string(done.Items[1]), "no pings today"), "step.done items %s", done.Items)
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("marks %v, want [deploy]", m)
	}
}
