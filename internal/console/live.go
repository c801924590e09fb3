package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentbull/toolruntime/protocol"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const streamOutputs = "TURN_OUTPUTS"

// maxStreams bounds the live streams served at once (each holds an
// ordered consumer and a subscription), streamsPerSession those of one
// session. A stream past maxStreams drops the oldest stream of the
// session holding the most, so that pages that never read (a stalled
// reader's socket buffers take minutes to fill) cannot keep another
// operator out. A stream ends after streamLife (the page's EventSource
// opens it again after the retry it was told), and is dropped when one
// event cannot be written within Limits.EventWriteTimeout.
const (
	maxStreams        = 64
	streamsPerSession = 8
	streamLife        = 10 * time.Minute
)

// keyBook remembers the fairness key of each turn whose steps the console
// saw published (a core subscription beside the work queue, which takes
// nothing from it), for the live page's key filter.
type keyBook struct {
	mu sync.Mutex
	m  map[string]string // agent/turn → key
}

func newKeyBook() *keyBook { return &keyBook{m: map[string]string{}} }

func (k *keyBook) set(agent, turn, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.m) > 100_000 {
		clear(k.m) // a bound, not a cache policy: keys come back with the turns' next steps
	}
	k.m[agent+"/"+turn] = key
}

// key is the turn's fairness key, by default its agent id (the
// protocol's default).
func (k *keyBook) key(agent, turn string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if v, ok := k.m[agent+"/"+turn]; ok {
		return v
	}
	return agent
}

func fairnessKey(agent string, c protocol.Context) string {
	if c.Fairness.Key != "" {
		return c.Fairness.Key
	}
	return agent
}

// Start follows the bus for the charts and the key filter, from its
// return (the subscriptions are in place) until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	onStep := func(m *nats.Msg) {
		var st struct {
			AgentID string           `json:"agent_id"`
			TurnID  string           `json:"turn_id"`
			Context protocol.Context `json:"context"`
		}
		if json.Unmarshal(m.Data, &st) == nil && st.AgentID != "" {
			s.keys.set(st.AgentID, st.TurnID, fairnessKey(st.AgentID, st.Context))
		}
	}
	var subs []*nats.Subscription
	for _, subj := range []string{"turn.call.*.*", "turn.task.*.*"} {
		sub, err := s.cfg.NC.Subscribe(subj, onStep)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
	}
	sub, err := s.cfg.NC.Subscribe("turn.call.output.*.*", func(m *nats.Msg) { s.stats.observe(m.Data) })
	if err != nil {
		return err
	}
	subs = append(subs, sub)
	for _, sub := range subs {
		_ = sub.SetPendingLimits(1<<16, 256<<20)
	}
	if err := s.cfg.NC.Flush(); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
	}()
	return nil
}

// streamSet is the live streams open.
type streamSet struct {
	mu   sync.Mutex
	open map[*liveStream]struct{}
}

type liveStream struct {
	se      *session
	started time.Time
	drop    context.CancelFunc
}

// admit counts a new stream of se, dropping the oldest stream of the
// session that holds the most when maxStreams are open (that stream's
// handler ends when its context does); it returns the new stream and
// the session of the one dropped, if any.
func (ss *streamSet) admit(se *session, drop context.CancelFunc) (*liveStream, *session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.open == nil {
		ss.open = map[*liveStream]struct{}{}
	}
	var dropped *session
	if len(ss.open) >= maxStreams {
		per := map[*session]int{}
		for l := range ss.open {
			per[l.se]++
		}
		var v *liveStream
		for l := range ss.open {
			if v == nil || per[l.se] > per[v.se] || per[l.se] == per[v.se] && l.started.Before(v.started) {
				v = l
			}
		}
		v.drop()
		delete(ss.open, v)
		dropped = v.se
	}
	l := &liveStream{se: se, started: time.Now(), drop: drop}
	ss.open[l] = struct{}{}
	return l, dropped
}

func (ss *streamSet) release(l *liveStream) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.open, l)
}

type liveView struct{ Agent, Turn, Key string }

func (s *Server) livePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.render(w, "live.html", s.page(r, "live", "Live turns", liveView{Agent: q.Get("agent"), Turn: q.Get("turn"), Key: q.Get("key")}))
}

// liveEvent is one server-sent event: an event of TURN_OUTPUTS or an
// activity, as the worker published it (Event), with where it came from.
type liveEvent struct {
	Source  string          `json:"source"` // "output" or "activity"
	Subject string          `json:"subject"`
	Time    time.Time       `json:"time"`
	AgentID string          `json:"agent_id"`
	TurnID  string          `json:"turn_id"`
	Key     string          `json:"key"`
	Event   json.RawMessage `json:"event"`
	// Names are the page's markers for the characters of Event's
	// strings outside printable ASCII, by code point in hexadecimal
	// (the script draws each as its marker, as the other pages do).
	Names map[string]string `json:"names,omitempty"`
}

// maxNames bounds the markers sent with one live event; a character
// past it is drawn as its code point alone.
const maxNames = 512

// eventNames collects the markers of the characters outside printable
// ASCII in the strings (and keys) of a JSON value.
func eventNames(data []byte) map[string]string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return nil
	}
	names := map[string]string{}
	add := func(s string) {
		for _, r := range s {
			if r >= 0x20 && r <= 0x7e || len(names) >= maxNames {
				continue
			}
			k := strconv.FormatInt(int64(r), 16)
			if _, ok := names[k]; ok {
				continue
			}
			if hidden(r) {
				names[k] = marker(r)
			} else {
				names[k] = lookalike(r)
			}
		}
	}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			add(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				add(k)
				walk(e)
			}
		}
	}
	walk(v)
	if len(names) == 0 {
		return nil
	}
	return names
}

// token is a filter's subject token: the id when it is a valid one,
// "*" when empty; ok is false for anything else.
func token(v string) (string, bool) {
	if v == "" {
		return "*", true
	}
	if len(v) > 64 {
		return "", false
	}
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return "", false
		}
	}
	return v, true
}

// liveEvents streams the turns' events (the last two minutes of
// TURN_OUTPUTS, then live) and their activity, as server-sent events.
func (s *Server) liveEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	agent, ok1 := token(q.Get("agent"))
	turn, ok2 := token(q.Get("turn"))
	key := q.Get("key")
	if !ok1 || !ok2 || len(key) > 64 {
		http.Error(w, "agent and turn are 1-64 characters of [A-Za-z0-9_-], key at most 64", http.StatusBadRequest)
		return
	}
	se := sessionOf(r)
	s.mu.Lock()
	if se.streams >= streamsPerSession {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("a session has at most %d live streams at once: close another live page", streamsPerSession), http.StatusTooManyRequests)
		return
	}
	se.streams++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		se.streams--
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(r.Context(), streamLife)
	defer cancel()
	ls, dropped := s.streams.admit(se, cancel)
	defer s.streams.release(ls)
	if dropped != nil {
		s.log.Warn("console: live streams bound reached: dropped the oldest stream of the session holding the most", "bound", maxStreams, "operator", dropped.name)
	}
	events := make(chan liveEvent, 512)
	lost := 0
	var lostMu sync.Mutex
	emit := func(source, subject string, t time.Time, data []byte) {
		parts := strings.Split(subject, ".")
		if len(parts) < 2 {
			return
		}
		a, tn := parts[len(parts)-2], parts[len(parts)-1]
		k := s.keys.key(a, tn)
		if key != "" && k != key {
			return
		}
		raw := json.RawMessage(data)
		if !json.Valid(data) {
			raw, _ = json.Marshal(strings.ToValidUTF8(string(data), "\uFFFD"))
		}
		select {
		case events <- liveEvent{Source: source, Subject: subject, Time: t.UTC(), AgentID: a, TurnID: tn, Key: k, Event: raw}:
		default:
			lostMu.Lock()
			lost++
			lostMu.Unlock()
		}
	}
	sub, err := s.cfg.NC.Subscribe(fmt.Sprintf("turn.activity.%s.%s", agent, turn), func(m *nats.Msg) { emit("activity", m.Subject, time.Now(), m.Data) })
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer sub.Unsubscribe()
	cons, err := s.js.OrderedConsumer(ctx, streamOutputs, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{fmt.Sprintf("turn.call.output.%s.%s", agent, turn)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   ptr(time.Now().Add(-2 * time.Minute)),
	})
	if err != nil {
		http.Error(w, fmt.Sprintf("stream %s: %v (is a worker running?)", streamOutputs, err), http.StatusBadGateway)
		return
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		t := time.Now()
		if md != nil {
			t = md.Timestamp
		}
		emit("output", m.Subject(), t, m.Data())
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer cc.Stop()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	rc := http.NewResponseController(w)
	// The server's read and write timeouts bound a page, not a stream:
	// the stream's own bound is a deadline per event.
	_ = rc.SetReadDeadline(time.Time{})
	write := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.limits.EventWriteTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		if err := rc.Flush(); err != nil {
			return false
		}
		_ = rc.SetWriteDeadline(time.Time{})
		return true
	}
	if !write(": live\nretry: 2000\n\n") {
		return
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		ok := true
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			b, _ := json.Marshal(ev)
			if ev.Names = eventNames(b); ev.Names != nil {
				b, _ = json.Marshal(ev)
			}
			ok = write("data: %s\n\n", b)
		case <-tick.C:
			lostMu.Lock()
			n := lost
			lost = 0
			lostMu.Unlock()
			if n > 0 {
				ok = write("event: lost\ndata: %d\n\n", n)
			} else {
				ok = write(": keep-alive\n\n")
			}
		}
		if !ok {
			s.log.Warn("console: a live stream was dropped: its reader took longer than the event write timeout", "remote", r.RemoteAddr, "timeout", s.limits.EventWriteTimeout)
			return
		}
	}
}

func ptr[T any](v T) *T { return &v }
