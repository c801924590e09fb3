package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// An event is rendered once for every live page that reads it: the
// second stream gets the bytes the first rendered; another event, the
// same bytes on another subject or under another key, or an event past
// the liveRendered kept, is rendered again. Each page's time is its own.
func TestLiveRenderedOnce(t *testing.T) {
	var ss streamSet
	ev := liveEvent{Source: "output", Subject: "turn.call.output.a.t", AgentID: "a", TurnID: "t", Key: "a"}
	data := []byte(`{"type":"call.output","status":"ok","step":12345678901234567890}`)
	render := func(ev liveEvent, data []byte) []byte {
		b, failure := ss.render(ev, data)
		if failure != nil {
			t.Fatal(failure)
		}
		return b
	}
	a, b := render(ev, data), render(ev, data)
	if &a[0] != &b[0] {
		t.Error("the same event was rendered twice")
	}
	other := ev
	other.Key = "k"
	for _, c := range []struct {
		ev   liveEvent
		data []byte
	}{{ev, []byte(`{"type":"call.output","status":"ok","step":12345678901234567891}`)}, {other, data}} {
		if c := render(c.ev, c.data); &c[0] == &a[0] || string(c) == string(a) {
			t.Errorf("another event was given the first one's rendering: %s", c)
		}
	}
	for i := range liveRendered {
		render(ev, []byte(`{"step":`+strings.Repeat("1", i+1)+`}`))
	}
	if c := render(ev, data); &c[0] == &a[0] || string(c) != string(a) {
		t.Error("an event past the kept ones was not rendered again, or rendered otherwise")
	}
	t1 := time.Date(2026, 12, 7, 11, 0, 0, 5e6, time.UTC)
	var got struct {
		Time  time.Time
		Cells []liveShown
	}
	if err := json.Unmarshal(liveData(a, t1), &got); err != nil || !got.Time.Equal(t1) || len(got.Cells) != 6 {
		t.Errorf("sent as %s: %+v %v", liveData(a, t1), got, err)
	}
}

// BenchmarkRenderLive is the cost of rendering one event (what each
// open live page paid before events were rendered once for all).
func BenchmarkRenderLive(b *testing.B) {
	small := []byte(`{"type":"call.output","call_id":"c1","namespace":"files","name":"read_file","status":"ok","duration_ms":12,"output":{"content":"hello world\n"}}`)
	big, _ := json.Marshal(map[string]any{"type": "step.done", "items": []string{strings.Repeat("ab\u200bc ", 200_000)}})
	for _, c := range []struct {
		name string
		data []byte
	}{{"small", small}, {"1MB", big}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			for b.Loop() {
				ev := liveEvent{Source: "output", AgentID: "a", TurnID: "t", Key: "a"}
				renderLive(&ev, c.data)
			}
		})
	}
}

// Rendering an event costs what the page shows of it, not a marker for
// each of its characters: an event of 800 KB whose every other
// character is a marker, in its JSON and in a cell, is rendered with a
// few thousand allocations (800,000 when every marker was made, then
// clipped).
func TestRenderLiveCostBounded(t *testing.T) {
	huge := []byte(`{"type":"call.output","status":"` + strings.Repeat("a\u200b", 100_000) + `","output":"` + strings.Repeat("b\u200c", 100_000) + `"}`)
	allocs := testing.AllocsPerRun(3, func() {
		ev := liveEvent{Source: "output", AgentID: "a", TurnID: "t", Key: "a"}
		renderLive(&ev, huge)
	})
	t.Logf("%d bytes rendered with %.0f allocations", len(huge), allocs)
	if allocs > 20_000 {
		t.Errorf("%.0f allocations to render %d bytes", allocs, len(huge))
	}
}

// Pages that read an event at the same moment (every open live page
// does) share one rendering of it.
func TestLiveRenderedOnceAtOnce(t *testing.T) {
	var ss streamSet
	ev := liveEvent{Source: "activity", Subject: "turn.activity.a.t", AgentID: "a", TurnID: "t", Key: "a"}
	data := []byte(`{"state":"running","label":"` + strings.Repeat("x\u200b", 50_000) + `"}`)
	const pages = 16
	got := make(chan []byte, pages)
	for range pages {
		go func() { b, _ := ss.render(ev, data); got <- b }()
	}
	first := <-got
	for range pages - 1 {
		if b := <-got; &b[0] != &first[0] {
			t.Fatal("an event was rendered more than once for pages reading it at once")
		}
	}
}
