package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/gateway"
	"github.com/agentbull/toolruntime/internal/category/diagnostics"
	"github.com/agentbull/toolruntime/internal/console"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

const testToken = "test-token-0123456789abcdef"

// hostile is what a model may put in the arguments of a held call.
const hostile = `<img src=x onerror=alert(1)></script><script>alert(2)</script>`

// rig is a real worker that holds mark and ping for approval, a gateway
// and a console served on loopback.
type rig struct {
	srv     *natstest.Server
	gw      *gateway.Client
	url     string
	markDir string
	console *console.Server
	// consoleNC is the console's own connection.
	consoleNC *nats.Conn
}

func newRig(t *testing.T) *rig { t.Helper(); return newRigWith(t, workertest.Logger(), nil) }

// newRigWith is newRig with the console's logger, and setup run on the
// console before it serves.
func newRigWith(t *testing.T, logger *slog.Logger, setup func(*console.Server)) *rig {
	t.Helper()
	r := &rig{srv: natstest.Start(t), markDir: t.TempDir()}
	cfg := workertest.Config("w1")
	cfg.Approval = turn.Policy{Names: []string{"mark", "ping"}}
	workertest.RunWorkerWith(t, r.srv, cfg, func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{diagnostics.Category(diagnostics.Config{MarkDir: r.markDir})}, nil
	})
	gw, err := gateway.New(r.srv.Connect(t), gateway.Options{Logger: workertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	r.gw = gw
	r.consoleNC = r.srv.Connect(t)
	c, err := console.New(console.Config{NC: r.consoleNC, Token: testToken, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	r.console = c
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c)
	t.Cleanup(hs.Close)
	r.url = hs.URL
	return r
}

var diagCtx = protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{diagnostics.Binding: true}}

func fc(id, name, args string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"type": "function_call", "call_id": id, "name": name, "arguments": args})
	return b
}

// hold sends a step of a mark call and a ping call with hostile
// arguments, and waits for its step.pending.
func (r *rig) hold(t *testing.T, agent, turnID string) *gateway.StepRun {
	t.Helper()
	note, _ := json.Marshal(map[string]string{"note": hostile})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := r.gw.Send(ctx, protocol.Step{AgentID: agent, TurnID: turnID, Step: 0, Context: diagCtx,
		Output: []json.RawMessage{fc("c1", "mark", `{"label":"deploy"}`), fc("c2", "ping", string(note))}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Close)
	ev, err := run.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ev.(*protocol.StepPending); !ok {
		t.Fatalf("first event %T, want a step.pending", ev)
	}
	return run
}

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// login returns a client with a session, and the session's CSRF token.
func (r *rig) login(t *testing.T) (*http.Client, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	resp, err := c.PostForm(r.url+"/login", url.Values{"token": {testToken}, "name": {"Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %s", resp.Status)
	}
	var ck *http.Cookie
	for _, k := range resp.Cookies() {
		if k.Name == "console_session" {
			ck = k
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Fatalf("session cookie %+v: want HttpOnly and SameSite=Strict", ck)
	}
	body := get(t, c, r.url+"/approvals", http.StatusOK)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token on the approvals page")
	}
	return c, m[1]
}

func get(t *testing.T, c *http.Client, u string, want int) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %s, want %d: %s", u, resp.Status, want, b)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Fatalf("GET %s: CSP %q", u, csp)
	}
	return string(b)
}

// Without a session every page, the live stream and every action are
// refused, and the login refuses a wrong token.
func TestRefusedWithoutToken(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.hold(t, "a1", "t1")
	c := &http.Client{CheckRedirect: noRedirect}
	for _, p := range []string{"/approvals", "/live", "/dead", "/fleet", "/api/live"} {
		body := get(t, c, r.url+p, http.StatusUnauthorized)
		if strings.Contains(body, "deploy") || strings.Contains(body, "c1") {
			t.Errorf("GET %s without a session shows data: %s", p, body)
		}
	}
	resp, err := c.PostForm(r.url+"/approvals/decide", url.Values{"agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"}, "call.0": {"c1"}, "decision.0": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("decide without a session: %s", resp.Status)
	}
	resp, err = c.PostForm(r.url+"/login", url.Values{"token": {testToken + "x"}, "name": {"Eve"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Errorf("login with a wrong token: %s, cookies %v", resp.Status, resp.Cookies())
	}
	// A forged cookie is no session.
	req, _ := http.NewRequest("GET", r.url+"/approvals", nil)
	req.AddCookie(&http.Cookie{Name: "console_session", Value: strings.Repeat("0", 48)})
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged cookie: %s", resp.Status)
	}
}

// The approvals page shows the held calls with their validated arguments
// as text; a decision without the CSRF token, or sent cross-site, is
// refused and decides nothing; with it the approved call runs with the
// shown arguments, the rejected one gets the reason, and who decided is
// kept.
func TestApproveThroughTheConsole(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	run := r.hold(t, "a1", "t1")
	c, csrf := r.login(t)
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	for _, want := range []string{`&#34;label&#34;: &#34;deploy&#34;`, "&lt;img src=x onerror=alert(1)&gt;&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;", "Append a line", "Answer pong", "left"} {
		if !strings.Contains(page, want) {
			t.Errorf("approvals page lacks %q", want)
		}
	}
	if testing.Verbose() {
		t.Log(page)
	}
	if strings.Contains(page, "<img") || strings.Contains(page, "<script>alert") {
		t.Fatalf("approvals page carries markup from the arguments:\n%s", page)
	}
	form := r.digests(t, c, "a1", "t1", url.Values{"agent_id": {"a1"}, "turn_id": {"t1"}, "step": {"0"},
		"call.0": {"c1"}, "decision.0": {"approve"}, "call.1": {"c2"}, "decision.1": {"reject"}, "reason.1": {"no pings <b>today</b>"}})
	post := func(v url.Values, hdr map[string]string) int {
		req, _ := http.NewRequest("POST", r.url+"/approvals/decide", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, val := range hdr {
			req.Header.Set(k, val)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(form, nil); code != http.StatusForbidden {
		t.Errorf("decide without CSRF: %d, want 403", code)
	}
	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("csrf", strings.Repeat("0", len(csrf)))
	if code := post(bad, nil); code != http.StatusForbidden {
		t.Errorf("decide with a wrong CSRF token: %d, want 403", code)
	}
	form.Set("csrf", csrf)
	if code := post(form, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("decide cross-site: %d, want 403", code)
	}
	if m := marks(t, r.markDir); len(m) != 0 {
		t.Fatalf("refused requests ran mark: %v", m)
	}
	if code := post(form, nil); code != http.StatusSeeOther {
		t.Fatalf("decide: %d, want 303", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	done, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Items) != 2 {
		t.Fatalf("step.done has %d items", len(done.Items))
	}
	if !strings.Contains(string(done.Items[1]), "no pings \\u003cb\\u003etoday\\u003c/b\\u003e") && !strings.Contains(string(done.Items[1]), "no pings <b>today</b>") {
		t.Errorf("rejected call's output lacks the reason: %s", done.Items[1])
	}
	if m := marks(t, r.markDir); len(m) != 1 || m[0] != "deploy" {
		t.Errorf("marks %v, want [deploy]", m)
	}
	page = get(t, c, r.url+"/approvals", http.StatusOK)
	if !strings.Contains(page, "No step is waiting") || !strings.Contains(page, "Ada") || !strings.Contains(page, "a1.t1.0.approval") {
		t.Errorf("after the decision the page should show no pending step and Ada's decision:\n%s", page)
	}
}

func marks(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "marks.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

var digestField = regexp.MustCompile(`name="digest\.(\d+)" value="([^"]+)"`)

var shownField = regexp.MustCompile(`name="shown" value="([^"]+)"`)

// digests adds to v the digests the approvals page shows for the held
// calls of agent/turn, as the page's form sends them.
func (r *rig) digests(t *testing.T, c *http.Client, agent, turnID string, v url.Values) url.Values {
	t.Helper()
	page := get(t, c, r.url+"/approvals", http.StatusOK)
	for _, sec := range strings.Split(page, `<section class="step"`)[1:] {
		if !strings.Contains(sec, `data-agent="`+agent+`" data-turn="`+turnID+`"`) {
			continue
		}
		for _, m := range digestField.FindAllStringSubmatch(sec, -1) {
			v.Set("digest."+m[1], m[2])
		}
		if m := shownField.FindStringSubmatch(sec); m != nil {
			v.Set("shown", m[1])
		}
		return v
	}
	t.Fatalf("no held step %s/%s on the page", agent, turnID)
	return v
}
