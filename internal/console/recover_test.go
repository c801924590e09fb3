package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentbull/toolruntime/internal/console"
)

// A renderer bug that a hostile event reaches costs that event its
// rendering, not the console its process: with a renderer that panics
// on one event's bytes, real events on the embedded NATS (a step's
// output through TURN_OUTPUTS, an activity through a core subscription)
// are each shown as unrenderable on the live page, the panic is logged,
// the events after them render, a page opened after reads them too, and
// every other page is served. A handler that panics before writing
// gives the operator a page saying so (500); one that panics mid-answer
// drops the connection, so that no half page passes for a whole one.
// Without the recovery, the first panic ends the test binary.
func TestPanicInRenderingKeepsTheConsoleUp(t *testing.T) {
	t.Parallel()
	const bug = "RENDERER-BUG"
	var logged lockedBuffer
	r := newRigWith(t, slog.New(slog.NewTextHandler(&logged, nil)), func(c *console.Server) {
		console.PanicRendering(c, bug)
		console.Handle(c, "GET /test/panic-before", func(http.ResponseWriter, *http.Request) { panic("a page's bug") })
		console.Handle(c, "GET /test/panic-during", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, "the first part of a page")
			http.NewResponseController(w).Flush()
			panic("a page's bug, half way")
		})
	})
	c, _ := r.login(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	open := func() *bufio.Reader { return openLive(ctx, t, c, r.url, "pa") }
	// read reads the stream's events until it has one of each turn of
	// want, by turn.
	read := func(br *bufio.Reader, want ...string) map[string]livePayload {
		got := map[string]livePayload{}
		for len(got) < len(want) {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("live, with %d of %v read: %v", len(got), want, err)
			}
			if d, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "data: "); ok {
				var ev livePayload
				if err := json.Unmarshal([]byte(d), &ev); err != nil || len(ev.Cells) != 6 {
					t.Fatalf("live event %.300q: %v", d, err)
				}
				got[ev.TurnID] = ev
			}
		}
		return got
	}
	page := open()
	js := r.srv.JetStream(t)
	nc := r.srv.Connect(t)
	hostile := `{"type":"call.output","call_id":"c1","status":"ok","output":"` + bug + `"}`
	if _, err := js.Publish(ctx, "turn.call.output.pa.out-bug", []byte(hostile)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("turn.activity.pa.act-bug", []byte(`{"state":"running","label":"`+bug+`"}`)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "turn.call.output.pa.after", []byte(`{"type":"call.output","call_id":"c2","status":"ok"}`)); err != nil {
		t.Fatal(err)
	}
	check := func(got map[string]livePayload) {
		t.Helper()
		for _, turn := range []string{"out-bug", "act-bug"} {
			ev, ok := got[turn]
			if !ok {
				continue
			}
			if e, j := ev.Cells[2].text(), ev.JSON.text(); !strings.Contains(e, "unrenderable") || j != e || ev.Cells[0].text() != "pa/"+turn ||
				len(ev.Cells[2].Lines) != 1 || ev.Cells[2].Lines[0][0][0] != "mark" || strings.Contains(j, bug) {
				t.Errorf("%s: shown as %+v", turn, ev)
			}
		}
		if ev := got["after"]; ev.Cells[5].text() != "ok" || ev.Cells[3].text() != "c2" {
			t.Errorf("the event after: %+v", ev)
		}
	}
	check(read(page, "out-bug", "act-bug", "after"))
	if l := logged.String(); !strings.Contains(l, "recovered from a panic") || !strings.Contains(l, "a renderer bug reached by "+bug) {
		t.Errorf("the panic was not logged:\n%.2000s", l)
	}
	// A page opened now reads the stream's last two minutes: the
	// unrenderable event as such, the next one rendered.
	check(read(open(), "out-bug", "after"))
	get(t, c, r.url+"/approvals", http.StatusOK)

	body := get(t, c, r.url+"/test/panic-before", http.StatusInternalServerError)
	if !strings.Contains(body, "The console failed on this request") {
		t.Errorf("a page whose handler panicked: %q", body)
	}
	resp, err := c.Get(r.url + "/test/panic-during")
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Errorf("a page whose handler panicked half way was read whole: %s %q", resp.Status, b)
		}
	}
	get(t, c, r.url+"/approvals", http.StatusOK)
	t.Logf("log: %d lines, %d of them a recovered panic (a line a second at most)", strings.Count(logged.String(), "\n"), strings.Count(logged.String(), "recovered from a panic"))
}
