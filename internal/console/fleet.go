package console

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// bucketWidth and buckets: the charts cover the last 5 minutes in 5 s
// buckets.
const (
	bucketWidth = 5 * time.Second
	buckets     = 60
)

// stats counts the step.done events and call latencies the console sees
// on the output subjects (a core subscription: every publish, a
// redelivery's copy included, which the stream drops).
type stats struct {
	mu    sync.Mutex
	start [buckets]int64 // the bucket's start, unix in bucketWidth units
	steps [buckets]int
	ms    [buckets][]float64
	now   func() time.Time
}

func newStats() *stats { return &stats{now: time.Now} }

func (s *stats) slot(t time.Time) int {
	u := t.UnixNano() / int64(bucketWidth)
	i := int(u % buckets)
	if s.start[i] != u {
		s.start[i], s.steps[i], s.ms[i] = u, 0, s.ms[i][:0]
	}
	return i
}

func (s *stats) observe(data []byte) {
	var ev struct {
		Type       string  `json:"type"`
		DurationMS float64 `json:"duration_ms"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.slot(s.now())
	switch ev.Type {
	case "step.done":
		s.steps[i]++
	case "call.output":
		if len(s.ms[i]) < 4096 {
			s.ms[i] = append(s.ms[i], ev.DurationMS)
		}
	}
}

// point is one bucket of the charts, oldest first.
type point struct {
	StepsPerSec float64
	P50, P95    float64
	Calls       int
}

func (s *stats) series() []point {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.now().UnixNano() / int64(bucketWidth)
	out := make([]point, buckets)
	for k := range buckets {
		u := cur - int64(buckets-1-k)
		i := int(u % buckets)
		if s.start[i] != u {
			continue
		}
		p := point{StepsPerSec: float64(s.steps[i]) / bucketWidth.Seconds(), Calls: len(s.ms[i])}
		if n := len(s.ms[i]); n > 0 {
			v := slices.Clone(s.ms[i])
			slices.Sort(v)
			p.P50, p.P95 = v[n/2], v[min(n-1, n*95/100)]
		}
		out[k] = p
	}
	return out
}

// chart is a small line chart drawn as SVG from numbers only.
type chart struct {
	Title, Last string
	Max         float64
	Lines       []chartLine
}

type chartLine struct {
	Class, Points, Label string
}

func lineChart(title, unit string, series [][]float64, labels []string) chart {
	const w, h = 600.0, 120.0
	top := 0.0
	for _, s := range series {
		for _, v := range s {
			top = max(top, v)
		}
	}
	if top == 0 {
		top = 1
	}
	c := chart{Title: title, Max: top}
	for li, s := range series {
		var b strings.Builder
		for i, v := range s {
			x := float64(i) * w / float64(max(1, len(s)-1))
			y := h - v/top*h
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		c.Lines = append(c.Lines, chartLine{Class: fmt.Sprintf("l%d", li), Points: strings.TrimSpace(b.String()), Label: labels[li]})
		if len(s) > 1 {
			// The last complete bucket: the current one is still filling.
			c.Last += fmt.Sprintf("%s %.1f %s  ", labels[li], s[len(s)-2], unit)
		}
	}
	return c
}

type fleetView struct {
	Instances []instanceView
	Streams   []streamView
	Keys      []keyView
	Charts    []chart
	Errors    []string
}

type instanceView struct {
	Name, ID, Version, Description string
	Metadata                       []metaView
	Endpoints                      []endpointView
	Started                        string
}

type endpointView struct {
	Name, Subject, Queue, AvgTime, LastError string
	Requests, Errors                         int
}

type streamView struct {
	Name        string
	Msgs, Bytes uint64
	Consumers   []consumerView
	// Ephemeral counts the ordered consumers (gateways, consoles).
	Ephemeral        int
	EphemeralPending uint64
}

type consumerView struct {
	Name                             string
	Pending                          uint64
	AckPending, Redelivered, Waiting int
}

type keyView struct {
	Key, Kind string
	Waiting   uint64
}

// micro's discovery replies, as nats.go/micro sends them.
type microInfo struct {
	Name        string            `json:"name"`
	ID          string            `json:"id"`
	Version     string            `json:"version"`
	Description string            `json:"description"`
	Metadata    map[string]string `json:"metadata"`
}

type microStats struct {
	ID        string `json:"id"`
	Started   string `json:"started"`
	Endpoints []struct {
		Name                  string `json:"name"`
		Subject               string `json:"subject"`
		QueueGroup            string `json:"queue_group"`
		NumRequests           int    `json:"num_requests"`
		NumErrors             int    `json:"num_errors"`
		LastError             string `json:"last_error"`
		AverageProcessingTime int64  `json:"average_processing_time"`
	} `json:"endpoints"`
}

// discover asks every instance of the micro service on subject and
// collects the replies for wait.
func discover(nc *nats.Conn, subject string, wait time.Duration) [][]byte {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil
	}
	defer sub.Unsubscribe()
	if err := nc.PublishRequest(subject, inbox, nil); err != nil {
		return nil
	}
	var out [][]byte
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case m := <-ch:
			out = append(out, m.Data)
		case <-t.C:
			return out
		}
	}
}

func (s *Server) fleetPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var v fleetView
	stats := map[string]microStats{}
	for _, b := range discover(s.cfg.NC, "$SRV.STATS.turn-worker", 400*time.Millisecond) {
		var st microStats
		if json.Unmarshal(b, &st) == nil {
			stats[st.ID] = st
		}
	}
	for _, b := range discover(s.cfg.NC, "$SRV.INFO.turn-worker", 400*time.Millisecond) {
		var in microInfo
		if json.Unmarshal(b, &in) != nil {
			continue
		}
		iv := instanceView{Name: in.Name, ID: in.ID, Version: in.Version, Description: in.Description}
		for k, val := range in.Metadata {
			iv.Metadata = append(iv.Metadata, metaView{k, val})
		}
		sort.Slice(iv.Metadata, func(i, j int) bool { return iv.Metadata[i].Name < iv.Metadata[j].Name })
		if st, ok := stats[in.ID]; ok {
			iv.Started = st.Started
			for _, e := range st.Endpoints {
				iv.Endpoints = append(iv.Endpoints, endpointView{Name: e.Name, Subject: e.Subject, Queue: e.QueueGroup,
					Requests: e.NumRequests, Errors: e.NumErrors, LastError: e.LastError, AvgTime: time.Duration(e.AverageProcessingTime).String()})
			}
		}
		v.Instances = append(v.Instances, iv)
	}
	sort.Slice(v.Instances, func(i, j int) bool { return v.Instances[i].ID < v.Instances[j].ID })
	if len(v.Instances) == 0 {
		v.Errors = append(v.Errors, "No turn-worker instance answered $SRV.INFO.turn-worker within 400 ms.")
	}
	names := s.js.StreamNames(ctx)
	var streams []string
	for n := range names.Name() {
		streams = append(streams, n)
	}
	if err := names.Err(); err != nil {
		v.Errors = append(v.Errors, "streams: "+err.Error())
	}
	slices.Sort(streams)
	for _, n := range streams {
		st, err := s.js.Stream(ctx, n)
		if err != nil {
			continue
		}
		info := st.CachedInfo()
		sv := streamView{Name: n, Msgs: info.State.Msgs, Bytes: info.State.Bytes}
		cl := st.ListConsumers(ctx)
		for ci := range cl.Info() {
			if ci.Config.Durable == "" {
				// Ordered consumers of gateways (and of this console):
				// one line for them all.
				sv.Ephemeral++
				sv.EphemeralPending += ci.NumPending
				continue
			}
			sv.Consumers = append(sv.Consumers, consumerView{Name: ci.Name, Pending: ci.NumPending, AckPending: ci.NumAckPending,
				Redelivered: ci.NumRedelivered, Waiting: ci.NumWaiting})
		}
		sort.Slice(sv.Consumers, func(i, j int) bool { return sv.Consumers[i].Name < sv.Consumers[j].Name })
		v.Streams = append(v.Streams, sv)
	}
	v.Keys = s.topKeys(ctx, 10)
	pts := s.stats.series()
	steps, p50, p95 := make([]float64, len(pts)), make([]float64, len(pts)), make([]float64, len(pts))
	for i, p := range pts {
		steps[i], p50[i], p95[i] = p.StepsPerSec, p.P50, p.P95
	}
	v.Charts = []chart{
		lineChart("Steps per second (step.done), last 5 minutes", "/s", [][]float64{steps}, []string{"steps"}),
		lineChart("Call latency (call.output duration_ms), last 5 minutes", "ms", [][]float64{p50, p95}, []string{"p50", "p95"}),
	}
	s.render(w, "fleet.html", s.page(r, "fleet", "Fleet", v))
}

// topKeys are the fairness keys with the most steps waiting in
// TURN_BACKLOG (turn.backlog.<call|task>.<key, "." as "~">). Steps a
// worker holds in its own intake are not in the stream and not counted.
func (s *Server) topKeys(ctx context.Context, n int) []keyView {
	st, err := s.js.Stream(ctx, "TURN_BACKLOG")
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter("turn.backlog.>"))
	if err != nil {
		return nil
	}
	var out []keyView
	for subj, c := range info.State.Subjects {
		parts := strings.SplitN(subj, ".", 4)
		if len(parts) != 4 {
			continue
		}
		out = append(out, keyView{Key: strings.ReplaceAll(parts[3], "~", "."), Kind: parts[2], Waiting: c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Waiting != out[j].Waiting {
			return out[i].Waiting > out[j].Waiting
		}
		return out[i].Key < out[j].Key
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	// vis shows a short hostile string (a call id, a reason, a label)
	// on one line, with its hidden characters (newlines too) as markers,
	// clipped.
	"vis": func(s string) shown { return showInline([]byte(s), maxShortShown) },
	"inc": func(n int) int { return n + 1 },
	"dec": func(n int) int { return n - 1 },
	"bytes": func(n uint64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
}

type metaView struct{ Name, Value string }
