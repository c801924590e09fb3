package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// livePayload is an event of /api/live as the script reads it.
type livePayload struct {
	Source, Type string
	TurnID       string `json:"turn_id"`
	Cells        []liveShown
	JSON         liveShown
}

type liveShown struct {
	Lines   [][][2]string
	LeftOut int `json:"left_out"`
	Total   int
}

// text is what the page draws of a shown value: its segments' texts,
// lines joined by newlines.
func (s liveShown) text() string {
	var b strings.Builder
	for i, l := range s.Lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		for _, g := range l {
			b.WriteString(g[1])
		}
	}
	return b.String()
}

var timeRe = regexp.MustCompile(`^\{"time":"[^"]*",`)

// The live stream sends each event rendered by the server, bounded
// however big the event: an event of 800 KB whose every other character
// is a marker is sent clipped with the count of what is left out (its
// cells and its JSON), within 64 KiB, where the stream sent it whole
// before; the hostile event's members are its bytes' markers and notes;
// two pages get the same rendering, each with its own time.
func TestLivePayload(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	c, _ := r.login(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	open := func() *bufio.Reader { return openLive(ctx, t, c, r.url, "hp") }
	pages := []*bufio.Reader{open(), open()}
	output, _ := hostileEvents()
	huge := []byte(`{"type":"call.output","call_id":"big","status":"ok","label":"` + strings.Repeat("a\u200b", 200_000) + `"}`)
	js := r.srv.JetStream(t)
	for _, turn := range []string{"hostile", "huge"} {
		data := output
		if turn == "huge" {
			data = huge
		}
		if _, err := js.Publish(ctx, "turn.call.output.hp."+turn, data); err != nil {
			t.Fatal(err)
		}
	}
	var seen [2]map[string]string
	for i, br := range pages {
		seen[i] = map[string]string{}
		for len(seen[i]) < 2 {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("live: %v", err)
			}
			d, ok := strings.CutPrefix(strings.TrimSuffix(l, "\n"), "data: ")
			if !ok {
				continue
			}
			var ev livePayload
			if err := json.Unmarshal([]byte(d), &ev); err != nil {
				t.Fatalf("live event %.300q: %v", d, err)
			}
			seen[i][ev.TurnID] = d
			if len(ev.Cells) != 6 {
				t.Fatalf("%s: %d cells, %d bytes sent", ev.TurnID, len(ev.Cells), len(d))
			}
			if i > 0 {
				continue
			}
			t.Logf("%s: %d bytes of event, %d sent", ev.TurnID, map[string]int{"hostile": len(output), "huge": len(huge)}[ev.TurnID], len(d))
			switch ev.TurnID {
			case "huge":
				if len(d) > 64<<10 || ev.JSON.LeftOut == 0 || ev.JSON.LeftOut >= ev.JSON.Total || ev.Cells[5].text() != "ok" {
					t.Errorf("huge: %d bytes sent, JSON %d of %d left out, status %q", len(d), ev.JSON.LeftOut, ev.JSON.Total, ev.Cells[5].text())
				}
				if !strings.Contains(ev.JSON.text(), `"label": "a⟦U+200B ZERO WIDTH SPACE⟧a⟦U+200B ZERO WIDTH SPACE⟧a`) {
					t.Errorf("huge: %.300q", ev.JSON.text())
				}
			case "hostile":
				for i, w := range map[int]string{
					1: "12345678901234567890⟦not exact as a 64-bit number: read as 1.2345678901234567e+19⟧",
					3: "c⟦U+202E RIGHT-TO-LEFT OVERRIDE⟧1⟦U+2067 RIGHT-TO-LEFT ISOLATE⟧x⟦U+2069 POP DIRECTIONAL ISOLATE⟧",
					5: "ok · 1e400⟦not exact as a 64-bit number: read as +Inf⟧ ms",
				} {
					if got := ev.Cells[i].text(); got != w {
						t.Errorf("hostile: cell %d %q, want %q", i, got, w)
					}
				}
				if ev.Type != "call.output" || ev.Source != "output" || ev.JSON.LeftOut != 0 ||
					!strings.Contains(ev.JSON.text(), `"neg": -0.0,`) || !strings.Contains(ev.JSON.text(), `"lone": "x⟦U+D800 LONE SURROGATE, not a character⟧y"`) {
					t.Errorf("hostile: %+v", ev)
				}
				for _, l := range ev.JSON.Lines {
					for _, g := range l {
						if g[0] == "" && strings.ContainsFunc(g[1], func(r rune) bool { return r < 0x20 || r > 0x7e }) {
							t.Errorf("hostile: plain text %q outside printable ASCII", g[1])
						}
					}
				}
			}
		}
	}
	for turn, d := range seen[0] {
		if a, b := timeRe.ReplaceAllString(d, "{"), timeRe.ReplaceAllString(seen[1][turn], "{"); a != b || a == d {
			t.Errorf("%s: two pages were sent\n%.300s\n%.300s", turn, d, seen[1][turn])
		}
	}
}

// openLive opens the live stream of agent's events on the console at
// url as c's session, closed at the test's end.
func openLive(ctx context.Context, t *testing.T, c *http.Client, url, agent string) *bufio.Reader {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/live?agent="+agent, nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("live: %s", resp.Status)
	}
	return bufio.NewReaderSize(resp.Body, 1<<20)
}
