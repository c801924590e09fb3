package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf16"

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
		s.guard("key filter", func() {
			var st struct {
				AgentID string           `json:"agent_id"`
				TurnID  string           `json:"turn_id"`
				Context protocol.Context `json:"context"`
			}
			if json.Unmarshal(m.Data, &st) == nil && st.AgentID != "" {
				s.keys.set(st.AgentID, st.TurnID, fairnessKey(st.AgentID, st.Context))
			}
		}, "subject", m.Subject)
	}
	var subs []*nats.Subscription
	for _, subj := range []string{"turn.call.*.*", "turn.task.*.*"} {
		sub, err := s.cfg.NC.Subscribe(subj, onStep)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
	}
	sub, err := s.cfg.NC.Subscribe("turn.call.output.*.*", func(m *nats.Msg) {
		s.guard("charts", func() { s.stats.observe(m.Data) }, "subject", m.Subject)
	})
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

// streamSet is the live streams open, and the events they rendered
// last.
type streamSet struct {
	mu   sync.Mutex
	open map[*liveStream]struct{}

	// renderer renders an event (renderLive when nil: a test sets
	// another).
	renderer func(*liveEvent, []byte)

	rmu      sync.Mutex
	seed     maphash.Seed
	rendered map[renderKey]*rendering
	ring     [liveRendered]renderKey
	next     int
}

// Every open live page reads the same events, each on its own
// subscription: an event is rendered once and its bytes kept for the
// other streams, the last liveRendered of them (at most some 60 KiB
// each: cells and JSON are clipped).
const liveRendered = 256

// liveQueued bounds the rendered bytes one stream holds unsent; an event
// past it (or past 512 events) is counted lost, and the page is told.
const liveQueued = 4 << 20

// renderKey is an event as every stream sees it: its subject, its
// bytes (by their length and a 64-bit hash with a seed of this process,
// which no agent can aim a collision at) and the fairness key its row
// shows.
type renderKey struct {
	source, subject, key string
	sum                  uint64
	size                 int
}

// render is ev with data rendered (renderLive), as the JSON sent
// without its time: rendered once for every stream that reads the same
// event (they read it at the same moment: the others wait for the
// first's rendering). An event whose rendering panicked is shown as
// unrenderable, and the panic is returned to the stream that rendered
// it (to be logged once, not once for each page).
func (ss *streamSet) render(ev liveEvent, data []byte) (b []byte, failure any) {
	ss.rmu.Lock()
	if ss.rendered == nil {
		ss.seed = maphash.MakeSeed()
		ss.rendered = map[renderKey]*rendering{}
	}
	k := renderKey{source: ev.Source, subject: ev.Subject, key: ev.Key, sum: maphash.Bytes(ss.seed, data), size: len(data)}
	r, ok := ss.rendered[k]
	if !ok {
		r = &rendering{done: make(chan struct{})}
		delete(ss.rendered, ss.ring[ss.next])
		ss.ring[ss.next] = k
		ss.next = (ss.next + 1) % len(ss.ring)
		ss.rendered[k] = r
	}
	ss.rmu.Unlock()
	if ok {
		<-r.done
		return r.b, nil
	}
	defer close(r.done) // a panic past this point still frees the other streams (nil: the event is lost)
	failure = ss.renderSafely(&ev, data)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // an event stream, not HTML: the script sets textContent
	_ = enc.Encode(ev)
	r.b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return r.b, failure
}

// renderSafely renders data into ev, and returns the renderer's panic,
// if any: ev then shows the event as unrenderable (unrenderable).
func (ss *streamSet) renderSafely(ev *liveEvent, data []byte) (failure any) {
	render := ss.renderer
	if render == nil {
		render = renderLive
	}
	defer func() {
		if failure = recover(); failure != nil {
			unrenderable(ev, len(data))
		}
	}()
	render(ev, data)
	return nil
}

// unrenderable makes ev's row a marker saying the console failed to
// render its size bytes, its turn cell (agent/turn, rendered on its own,
// and left empty should that fail too) aside.
func unrenderable(ev *liveEvent, size int) {
	ev.Type, ev.Cells, ev.JSON = "", [6]liveShown{}, liveShown{}
	mark := liveShown{Lines: [][][2]string{{{"mark", fmt.Sprintf("⟦unrenderable: the console failed to render this event of %d bytes; its log says why⟧", size)}}}}
	ev.Cells[2], ev.JSON = mark, mark
	func() {
		defer func() { _ = recover() }()
		var turn cell
		turn.str(ev.AgentID)
		turn.text("/")
		turn.str(ev.TurnID)
		ev.Cells[0] = toLive(turn.shown())
	}()
}

// rendering is an event's rendering, done when done is closed.
type rendering struct {
	done chan struct{}
	b    []byte
}

// liveData is a rendered event with its time, as one event's data.
func liveData(b []byte, t time.Time) []byte {
	out := make([]byte, 0, len(b)+48)
	out = append(out, `{"time":"`...)
	out = t.UTC().AppendFormat(out, time.RFC3339Nano)
	out = append(out, `",`...)
	return append(out, b[1:]...)
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

// The live page shows an event as the other pages show a value: the
// server renders it from the bytes the worker published, with the same
// functions (visible, showJSON: named markers, counted runs, stacks of
// combining marks, notes on inexact numbers, a clip with its count),
// and sends the result; the script only builds elements from it
// (textContent, never innerHTML). Parsed in the browser, the event was
// another value: JSON.parse reads 12345678901234567890 as
// 12345678901234567000 and 1e400 as Infinity.

// liveEvent is one server-sent event: an event of TURN_OUTPUTS or an
// activity, rendered (its time, which differs by stream for an
// activity, is added to the rendered bytes as they are sent: liveData).
type liveEvent struct {
	Source  string `json:"source"` // "output" or "activity"
	Subject string `json:"subject"`
	AgentID string `json:"agent_id"`
	TurnID  string `json:"turn_id"`
	Key     string `json:"key"`
	// Type is the event's type when the page styles its row by it
	// (liveTypes), else empty.
	Type string `json:"type"`
	// Cells are the row's columns after its time: turn, step, event,
	// call, tool, status; JSON is the whole event, indented.
	Cells [6]liveShown `json:"cells"`
	JSON  liveShown    `json:"json"`
}

// liveShown is a shown value as the script draws it: its lines, each a
// list of segments [class, text] (class "" for plain text, else the
// marker's class, as the server's templates draw them), and the bytes
// left out of Total when it is clipped.
type liveShown struct {
	Lines   [][][2]string `json:"lines"`
	LeftOut int           `json:"left_out,omitempty"`
	Total   int           `json:"total,omitempty"`
}

// liveTypes are the event types a row is styled by.
var liveTypes = []string{"step.pending", "call.output", "step.done"}

// liveJSONShown is how much page one event's JSON may weigh: past it
// the JSON is clipped with the count left out, as on the dead letters'
// list (4 KiB there; a live event is often a step's outputs, and a
// stack of 300 combining marks alone weighs 9 KiB named). A cell is
// clipped at maxShortShown, as a short value is on every page.
const liveJSONShown = 32 << 10

func (g seg) class() string {
	switch {
	case g.Look:
		return "mark look"
	case g.Mark:
		return "mark"
	case g.Note:
		return "mark note"
	}
	return ""
}

func toLive(s shown) liveShown {
	l := liveShown{Lines: make([][][2]string, len(s.Lines))}
	for i, ln := range s.Lines {
		segs := make([][2]string, 0, len(ln.Segs))
		for _, g := range ln.Segs {
			if c := g.class(); c == "" && len(segs) > 0 && segs[len(segs)-1][0] == "" {
				segs[len(segs)-1][1] += g.Text // plain runs as one text
			} else {
				segs = append(segs, [2]string{c, g.Text})
			}
		}
		l.Lines[i] = segs
	}
	if s.Clipped() {
		l.LeftOut, l.Total = s.LeftOut, s.Total
	}
	return l
}

// renderLive renders the event data published on subject into ev's
// cells and JSON.
//
// It reads the event with one pass of encoding/json (json.Indent, which
// checks it is JSON and indents it for its JSON part) and byte walks of
// its own: json.Unmarshal into a map checks the whole event before it
// decodes it (two passes), and counting a step's items did the same
// again over them, some 100 ms for an event of 1 MB on a loaded host.
func renderLive(ev *liveEvent, data []byte) {
	var indented bytes.Buffer
	var f map[string]json.RawMessage // not JSON, or not an object: no fields, the JSON shown as text
	valid := json.Indent(&indented, data, "", "  ") == nil
	if valid {
		f = members(data)
	}
	typ := fieldString(f["type"])
	if slices.Contains(liveTypes, typ) && ev.Source == "output" {
		ev.Type = typ
	}
	var turn, step, event, call, tool, status cell
	turn.str(ev.AgentID)
	turn.text("/")
	turn.str(ev.TurnID)
	if ev.Key != ev.AgentID {
		turn.text(" [")
		turn.str(ev.Key)
		turn.text("]")
	}
	step.value(f["step"])
	switch {
	case ev.Source == "activity":
		event.text("activity")
	case truthy(f["type"]):
		event.value(f["type"])
	default:
		event.text("?")
	}
	call.value(f["call_id"])
	if truthy(f["namespace"]) {
		tool.value(f["namespace"])
		tool.text(".")
	}
	tool.value(f["name"])
	switch {
	case ev.Source == "activity":
		status.value(f["state"])
		if truthy(f["label"]) {
			status.text(": ")
			status.value(f["label"])
		}
		if truthy(f["progress"]) {
			p := members(f["progress"])
			status.text(" (")
			status.value(p["done"])
			if truthy(p["total"]) {
				status.text(" of ")
				status.value(p["total"])
			}
			status.text(")")
		}
	case typ == "call.output":
		status.value(f["status"])
		if e := members(f["error"]); truthy(e["kind"]) {
			status.text(" ")
			status.value(e["kind"])
		}
		if f["duration_ms"] != nil {
			status.text(" · ")
			status.value(f["duration_ms"])
			status.text(" ms")
		}
	case typ == "step.done":
		status.text(fmt.Sprintf("%d outputs", elements(f["items"])))
		if truthy(f["end_turn"]) {
			status.text(" · end_turn")
		}
	case typ == "step.pending":
		status.text(fmt.Sprintf("%d held for approval", elements(f["approvals"])))
	}
	for i, c := range []*cell{&turn, &step, &event, &call, &tool, &status} {
		ev.Cells[i] = toLive(c.shown())
	}
	if valid {
		ev.JSON = toLive(showIndented(indented.Bytes(), liveJSONShown))
	} else {
		ev.JSON = toLive(showText(data, liveJSONShown))
	}
}

// cell is a row's cell, made of parts: a short value as every page
// shows one (visible), within maxShortShown of page. Each part is made
// visible up to that weight only (visibleUpTo), so that a member of a
// megabyte costs what the cell shows of it.
type cell struct {
	segs  []seg
	total int // bytes of the value the cell shows
}

func (c *cell) shown() shown {
	return fitLines(1, func(int) []seg { return c.segs }, c.total, maxShortShown)
}

// text is the page's own text.
func (c *cell) text(s string) {
	c.segs = append(c.segs, seg{Text: s})
	c.total += len(s)
}

// str is a value's text.
func (c *cell) str(s string) {
	c.segs = append(c.segs, visibleUpTo(s, false, maxShortShown)...)
	c.total += len(s)
}

// value is a member's value: a string as its text (every escape
// decoded, a newline its marker, as a short value on every page),
// anything else as its JSON on one line (a number as it was spelled,
// with its note when a 64-bit float reads it as another).
func (c *cell) value(raw json.RawMessage) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	if raw[0] != '"' {
		var b bytes.Buffer
		if json.Compact(&b, raw) != nil {
			c.str(string(raw))
			return
		}
		u := unescapeStrings(b.Bytes())
		c.segs = append(c.segs, visibleUpTo(u, true, maxShortShown)...)
		c.total += len(u)
		return
	}
	// A string, decoded here rather than by json.Unmarshal, which makes
	// a lone surrogate escape (\ud800) U+FFFD: it is named as the JSON
	// on every page names it.
	u := unescapeStrings(raw) // left escaped: \" \\ \b \f \n \r \t, other controls, lone surrogates
	if len(u) < 2 || u[0] != '"' || u[len(u)-1] != '"' {
		c.str(u)
		return
	}
	u = u[1 : len(u)-1]
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		if u[i] != '\\' || i+1 == len(u) {
			b.WriteByte(u[i])
			continue
		}
		r, n := jsonEscape(u[i:])
		switch {
		case n == 0: // \" \\ \/
			b.WriteByte(u[i+1])
			i++
		case utf16.IsSurrogate(r):
			c.str(b.String())
			b.Reset()
			text, _, k := escapeRun(u, i, n, r)
			c.segs = append(c.segs, seg{Text: text, Mark: true, Raw: u[i : i+k*n]})
			c.total += k * n
			i += k*n - 1
		default:
			b.WriteRune(r)
			i += n - 1
		}
	}
	c.str(b.String())
}

// members are the members of a JSON object (none for anything else),
// each the bytes of its value, by name: the last of a name, its escapes
// decoded, as json.Unmarshal into a map keeps them. raw is valid JSON
// (renderLive checked the whole event): the walk only finds where each
// name and value ends.
func members(raw []byte) map[string]json.RawMessage {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil
	}
	f := map[string]json.RawMessage{}
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] == '"'; {
		end := skipValue(raw, i)
		name := string(raw[i+1 : end-1])
		if bytes.IndexByte(raw[i:end], '\\') >= 0 {
			_ = json.Unmarshal(raw[i:end], &name)
		}
		i = skipSpace(raw, skipSpace(raw, end)+1) // past the colon
		end = skipValue(raw, i)
		f[name] = raw[i:end]
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return f
}

// elements is the length of a JSON array, 0 for anything else (raw is
// valid JSON, as for members).
func elements(raw []byte) int {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '[' {
		return 0
	}
	n := 0
	for i = skipSpace(raw, i+1); i < len(raw) && raw[i] != ']'; n++ {
		i = skipSpace(raw, skipValue(raw, i))
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return n
}

// skipSpace is the index of the first byte from i that is not JSON's
// white space.
func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// ends reports whether c ends a number or a literal.
func ends(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', ']', '}':
		return true
	}
	return false
}

// skipValue is the index just past the valid JSON value that starts at
// raw[i].
func skipValue(raw []byte, i int) int {
	depth := 0
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
		case ' ', '\t', '\n', '\r', ',', ':':
			continue
		default: // a number or a literal, to its end
			for i+1 < len(raw) && !ends(raw[i+1]) {
				i++
			}
		}
		if depth == 0 {
			return i + 1
		}
	}
	return i
}

// fieldString is a JSON string's value, "" for anything else.
func fieldString(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// truthy reports whether a member is there and is not null, false, ""
// or a zero (what the page shows only when it is set).
func truthy(raw json.RawMessage) bool {
	switch s := string(raw); s {
	case "", "null", "false", `""`:
		return false
	default:
		if s[0] == '-' || s[0] >= '0' && s[0] <= '9' {
			f, err := strconv.ParseFloat(s, 64)
			return err != nil || f != 0
		}
	}
	return true
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
	// events are rendered once, as they come (render), and queued as
	// the bytes to send: at most 512 of them and liveQueued bytes, past
	// which an event is counted lost (the page is told how many).
	type queuedEvent struct {
		b []byte
		t time.Time
	}
	events := make(chan queuedEvent, 512)
	var queued atomic.Int64
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
		var b []byte
		if len(events) < cap(events) && queued.Load() < liveQueued {
			var failure any
			b, failure = s.streams.render(liveEvent{Source: source, Subject: subject, AgentID: a, TurnID: tn, Key: k}, data)
			if failure != nil {
				s.panicked("live rendering", failure, "subject", subject, "bytes", len(data))
			}
		}
		if b != nil && queued.Add(int64(len(b))) <= liveQueued {
			select {
			case events <- queuedEvent{b, t}:
				return
			default:
			}
		}
		if b != nil {
			queued.Add(-int64(len(b)))
		}
		lostMu.Lock()
		lost++
		lostMu.Unlock()
	}
	// Each event is handled in a NATS callback, which has no recover:
	// a panic there, past the rendering's own recovery, loses the event
	// (the page is told), not the console.
	guarded := func(source, subject string, t time.Time, data []byte) {
		if !s.guard("live event", func() { emit(source, subject, t, data) }, "subject", subject, "bytes", len(data)) {
			lostMu.Lock()
			lost++
			lostMu.Unlock()
		}
	}
	sub, err := s.cfg.NC.Subscribe(fmt.Sprintf("turn.activity.%s.%s", agent, turn), func(m *nats.Msg) { guarded("activity", m.Subject, time.Now(), m.Data) })
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
		guarded("output", m.Subject(), t, m.Data())
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
			queued.Add(-int64(len(ev.b)))
			ok = write("data: %s\n\n", liveData(ev.b, ev.t))
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
