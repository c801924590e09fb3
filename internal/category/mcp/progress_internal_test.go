package mcp

import (
	"context"
	"math"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbull/toolruntime/internal/tools"
)

type gotReport struct {
	done, total int64
	label       string
}

func routed(t testing.TB) (*progressRoutes, string, *[]gotReport, func()) {
	t.Helper()
	var got []gotReport
	ctx := tools.WithProgress(context.Background(), func(done, total int64, label string) {
		got = append(got, gotReport{done, total, label})
	})
	r := &progressRoutes{}
	token, remove := r.add(ctx)
	return r, token, &got, remove
}

// What a hostile server can put in a notification the SDK decodes: each
// value is dropped or bounded, never passed on as it came.
func TestProgressNotificationMapping(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	r, token, got, remove := routed(t)
	n := func(token any, progress, total float64, msg string) {
		r.notify(&sdk.ProgressNotificationParams{ProgressToken: token, Progress: progress, Total: total, Message: msg})
	}
	r.notify(nil)
	n("tr-999", 1, 2, "a token of no running call")
	n(float64(1), 1, 2, "a number")
	n(nil, 1, 2, "no token")
	n(map[string]any{"a": 1}, 1, 2, "an object")
	n(token, math.NaN(), 2, "NaN")
	n(token, math.Inf(1), 2, "Inf")
	n(token, -1, 2, "negative")
	n(token, 1<<60, 0, "beyond 2^53")
	n(token, 2, 10, " two of ten ")
	n(token, 1, 10, "went back")
	n(token, 2, 10, "") // the same again: taken
	n(token, 3, math.NaN(), "NaN total")
	n(token, 4, -5, "negative total")
	n(token, 5, 4, "total below progress")
	n(token, 6, math.Inf(1), "Inf total")
	n(token, 7, 1<<60, huge)
	n(token, 7.5, 10, "a fraction: thousandths from now on")
	n(token, 8, 10, "still thousandths")
	remove()
	n(token, 9, 10, "after the call")
	want := []gotReport{
		{2, 10, "two of ten"},
		{2, 10, ""},
		{3, 0, "NaN total"},
		{4, 0, "negative total"},
		{5, 0, "total below progress"},
		{6, 0, "Inf total"},
		{7, 0, ""}, // the label is checked below
		{7500, 10000, "a fraction: thousandths from now on"},
		{8000, 10000, "still thousandths"},
	}
	if len(*got) != len(want) {
		t.Fatalf("got %d reports, want %d: %+v", len(*got), len(want), *got)
	}
	for i, w := range want {
		g := (*got)[i]
		if i == 6 {
			if len(g.label) > maxProgressMessage || !strings.HasPrefix(g.label, "xxx") {
				t.Errorf("huge message became a %d byte label", len(g.label))
			}
			g.label = ""
		}
		if g != w {
			t.Errorf("report %d: %+v, want %+v", i, g, w)
		}
	}
}

// Servers that count from 0 to 1 are reported in thousandths, rounded
// down.
func TestProgressFractions(t *testing.T) {
	r, token, got, _ := routed(t)
	for _, p := range []float64{0, 0.25, 0.3333, 0.9999, 1} {
		r.notify(&sdk.ProgressNotificationParams{ProgressToken: token, Progress: p, Total: 1})
	}
	want := []gotReport{{0, 1, ""}, {250, 1000, ""}, {333, 1000, ""}, {999, 1000, ""}, {1000, 1000, ""}}
	for i, w := range want {
		if i >= len(*got) || (*got)[i] != w {
			t.Fatalf("reports %+v, want %+v", *got, want)
		}
	}
}

// Whatever a server sends, a call's reports have done ≥ 0 and never
// going back, a total of 0 or at least done, and a bounded message.
func FuzzProgressNotification(f *testing.F) {
	f.Add(1.0, 10.0, "one", 0.5, 0.0, "half", 2.0, 1.0, "")
	f.Add(math.NaN(), math.Inf(1), "\xff", -1.0, 1e300, "x", 1e15, 1e16, "big")
	f.Fuzz(func(t *testing.T, p1, t1 float64, m1 string, p2, t2 float64, m2 string, p3, t3 float64, m3 string) {
		r, token, got, _ := routed(t)
		for _, n := range []struct {
			p, t float64
			m    string
		}{{p1, t1, m1}, {p2, t2, m2}, {p3, t3, m3}} {
			r.notify(&sdk.ProgressNotificationParams{ProgressToken: token, Progress: n.p, Total: n.t, Message: n.m})
		}
		var last int64 = -1
		for _, g := range *got {
			if g.done < 0 || (g.total != 0 && g.total < g.done) || len(g.label) > maxProgressMessage {
				t.Fatalf("report %+v", g)
			}
			if g.done < last {
				t.Fatalf("done went back: %+v", *got)
			}
			last = g.done
		}
	})
}
