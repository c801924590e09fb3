package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

type deadLetter struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Headers nats.Header
	Data    []byte
	Size    int
}

// headers lists the messages of TURN_DEAD from sequence start (on the
// filters' subjects, every one when none), at most limit of them, oldest
// first, with their headers only: Data is nil and Size is the payload's
// size. A listing costs what its headers cost, however large the
// payloads.
func (s *Server) headers(ctx context.Context, filters []string, start uint64, limit int) ([]deadLetter, error) {
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, InactiveThreshold: time.Minute,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(start, 1), FilterSubjects: filters,
		MemoryStorage: true, Replicas: 1}
	cons, err := st.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.DeleteConsumer(context.WithoutCancel(ctx), cons.CachedInfo().Name) }()
	want := int(min(uint64(limit), cons.CachedInfo().NumPending))
	var out []deadLetter
	for len(out) < want {
		b, err := cons.Fetch(want-len(out), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, err
		}
		n := 0
		for m := range b.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			size, _ := strconv.Atoi(m.Headers().Get("Nats-Msg-Size"))
			h := m.Headers()
			delete(h, "Nats-Msg-Size")
			out = append(out, deadLetter{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(), Headers: h, Size: size})
		}
		if n == 0 {
			break
		}
	}
	return out, nil
}

// headersIn lists the messages of TURN_DEAD on the filters' subjects
// with sequences from start up to (not including) end, headers only,
// oldest first, until the headers read weigh budget bytes; n is what
// they weigh (with those of the batch read past end).
func (s *Server) headersIn(ctx context.Context, filters []string, start, end uint64, budget int) (out []deadLetter, n int, err error) {
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return nil, 0, err
	}
	cfg := jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, HeadersOnly: true, InactiveThreshold: time.Minute,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(start, 1), FilterSubjects: filters,
		MemoryStorage: true, Replicas: 1}
	cons, err := st.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = st.DeleteConsumer(context.WithoutCancel(ctx), cons.CachedInfo().Name) }()
	pending := cons.CachedInfo().NumPending
	for pending > 0 && n < budget {
		// A count the consumer has (a fetch of more waits out its
		// MaxWait), no more than the window holds, and no more than the
		// budget left holds at a letter's most (64 KiB of headers).
		count := min(pending, max(end-start, 1), uint64(max(1, (budget-n)/(64<<10))))
		b, err := cons.Fetch(int(count), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return out, n, err
		}
		got, past := 0, false
		for m := range b.Messages() {
			got++
			if pending > 0 {
				pending--
			}
			h := m.Headers()
			for k, vs := range h {
				for _, v := range vs {
					n += len(k) + len(v) + 4
				}
			}
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			if md.Sequence.Stream >= end {
				past = true
				continue
			}
			size, _ := strconv.Atoi(h.Get("Nats-Msg-Size"))
			delete(h, "Nats-Msg-Size")
			out = append(out, deadLetter{Seq: md.Sequence.Stream, Time: md.Timestamp, Subject: m.Subject(), Headers: h, Size: size})
		}
		if got == 0 || past {
			break
		}
	}
	return out, n, nil
}

// body reads one dead letter whole.
func (s *Server) body(ctx context.Context, seq uint64) (deadLetter, error) {
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return deadLetter{}, err
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		return deadLetter{}, err
	}
	return deadLetter{Seq: m.Sequence, Time: m.Time, Subject: m.Subject, Headers: m.Header, Data: m.Data, Size: len(m.Data)}, nil
}

// redrivable is what may be published again: a step or an approval
// message that reached the delivery limit. A malformed one would only
// be dead-lettered again.
func redrivable(d deadLetter) bool {
	subj := d.Headers.Get(protocol.HeaderDeadSubject)
	return strings.HasPrefix(d.Headers.Get(protocol.HeaderDeadReason), "delivery limit reached") &&
		(strings.HasPrefix(subj, "turn.call.") || strings.HasPrefix(subj, "turn.task.") || strings.HasPrefix(subj, "turn.approval."))
}

// lettersPerPage is how many dead letters a page of /dead lists, newest
// first; a payload of at most inlinePayload bytes is shown on the list,
// clipped to listPayload; a larger one only on its own page
// (/dead/letter), clipped to letterPayload. A page reads the headers of
// its letters and the payloads it shows, nothing else.
const (
	lettersPerPage = 25
	inlinePayload  = 16 << 10
	listPayload    = 4 << 10
	letterPayload  = 256 << 10
)

type deadView struct {
	Letters []deadLetterView
	Error   string
	// Total letters in the stream; Older is the sequence the next page
	// starts below (0: none), Newer the one the previous page started
	// below (0: this is the first).
	Total        uint64
	Older, Newer uint64
	Single       bool
}

type deadLetterView struct {
	Seq                     uint64
	Time                    time.Time
	Subject, Reason, Origin string
	Headers                 []headerView
	// HeadersLeft counts the header values past the letter's bound.
	HeadersLeft int
	// Payload is shown (maybe clipped); Unread says it was not read for
	// the list (too large): its page shows it.
	Payload     shown
	Unread      bool
	Bytes       int
	Redrive     bool
	RedriveNote string
}

type headerView struct {
	Name, Value shown
}

func (s *Server) deadPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var v deadView
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		v.Error = fmt.Sprintf("stream %s: %v (is a worker running?)", protocol.StreamDead, err)
		s.render(w, "dead.html", s.page(r, "dead", "Dead letters", v))
		return
	}
	info, err := st.Info(ctx)
	if err != nil {
		v.Error = err.Error()
		s.render(w, "dead.html", s.page(r, "dead", "Dead letters", v))
		return
	}
	v.Total = info.State.Msgs
	end := info.State.LastSeq + 1
	if b, err := strconv.ParseUint(r.URL.Query().Get("before"), 10, 64); err == nil && b > 0 && b < end {
		end = b
		v.Newer = min(info.State.LastSeq+1, end+lettersPerPage)
	}
	// The letters below end, newest first: a window of sequences at a
	// time (some may be deleted), until the page is full.
	var letters []deadLetter
	for hi := end; hi > info.State.FirstSeq && len(letters) < lettersPerPage && ctx.Err() == nil; {
		// As many sequences as letters are missing: each read costs the
		// server the letters' whole payloads, however few bytes of
		// headers it returns.
		lo := max(info.State.FirstSeq, hi-min(hi, uint64(lettersPerPage-len(letters))))
		// The newest of the window as an earlier load read them; only
		// the sequences below the first it did not are read.
		top := hi
		for ; top > lo; top-- {
			d, known := s.letters.get(top-1, info.State.NumDeleted)
			if !known {
				break
			}
			if d != nil {
				letters = append(letters, *d)
			}
		}
		if top > lo {
			got, err := s.headers(ctx, nil, lo, int(top-lo))
			if err != nil {
				v.Error = err.Error()
				break
			}
			s.letters.fill(lo, top, info.State.NumDeleted, got)
			for i := len(got) - 1; i >= 0 && len(letters) < lettersPerPage; i-- {
				if got[i].Seq < top {
					letters = append(letters, got[i])
				}
			}
		}
		hi = lo
	}
	if n := len(letters); n == lettersPerPage && letters[n-1].Seq > info.State.FirstSeq {
		v.Older = letters[n-1].Seq
	}
	for _, d := range letters {
		if d.Size <= inlinePayload {
			if full, err := s.body(ctx, d.Seq); err == nil {
				d.Data = full.Data
			}
		}
		v.Letters = append(v.Letters, s.letterView(d, listPayload, listHeaders))
	}
	s.render(w, "dead.html", s.page(r, "dead", "Dead letters", v))
}

// letterPage shows one dead letter, its payload clipped to letterPayload.
func (s *Server) letterPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	v := deadView{Single: true}
	seq, err := strconv.ParseUint(r.URL.Query().Get("seq"), 10, 64)
	if err != nil {
		http.Error(w, "seq must be a stream sequence", http.StatusBadRequest)
		return
	}
	d, err := s.body(ctx, seq)
	if err != nil {
		v.Error = fmt.Sprintf("Dead letter %d: %v", seq, err)
	} else {
		v.Total = 1
		v.Letters = append(v.Letters, s.letterView(d, letterPayload, letterHeaders))
	}
	s.render(w, "dead.html", s.page(r, "dead", "Dead letter", v))
}

// maxHeaderShown clips each header value on the page; listHeaders and
// letterHeaders bound what a letter's headers weigh together on the list
// and on its own page (64 KiB of headers, each a marker, would weigh
// over a megabyte): the rest are counted, not shown.
const (
	maxHeaderShown = 1024
	listHeaders    = 8 << 10
	letterHeaders  = 64 << 10
)

func (s *Server) letterView(d deadLetter, limit, headerLimit int) deadLetterView {
	dv := deadLetterView{Seq: d.Seq, Time: d.Time.UTC(), Subject: d.Subject, Reason: textclip.Ellipsis(d.Headers.Get(protocol.HeaderDeadReason), maxHeaderShown),
		Origin: textclip.Ellipsis(d.Headers.Get(protocol.HeaderDeadSubject), maxHeaderShown), Bytes: d.Size, Redrive: redrivable(d)}
	names := make([]string, 0, len(d.Headers))
	for k := range d.Headers {
		names = append(names, k)
	}
	slices.Sort(names)
	left := headerLimit
	for _, k := range names {
		for _, val := range d.Headers[k] {
			if left <= 0 {
				dv.HeadersLeft++
				continue
			}
			name := showInline([]byte(k), min(maxShortShown, left))
			h := headerView{name, showInline([]byte(val), max(1, min(maxHeaderShown, left-name.Cost)))}
			left -= name.Cost + h.Value.Cost + markWeight
			dv.Headers = append(dv.Headers, h)
		}
	}
	switch {
	case d.Data == nil && d.Size > 0:
		dv.Unread = true
	case json.Valid(d.Data):
		dv.Payload = showJSON(d.Data, limit)
	default:
		dv.Payload = showText(d.Data, limit)
	}
	if dv.Redrive {
		dv.RedriveNote = redriveNote(dv.Origin)
		if !dv.whole() {
			// A re-drive publishes every byte of the payload and the
			// headers it carries: offered only where all of them are on
			// the page, as Approve is.
			dv.Redrive = false
			dv.RedriveNote = "Not all of what a re-drive would publish is shown on this list."
			if limit >= letterPayload {
				dv.RedriveNote = fmt.Sprintf("This letter weighs more than one page shows whole (%d bytes of payload, %d of headers): part of what a re-drive would publish is not shown, so it cannot be re-driven from the console.", letterPayload, letterHeaders)
			}
		}
	}
	return dv
}

// whole reports whether every byte a re-drive publishes is on the page:
// the payload, and each header's name and value.
func (dv deadLetterView) whole() bool {
	if dv.Unread || dv.Payload.Clipped() || dv.HeadersLeft > 0 {
		return false
	}
	for _, h := range dv.Headers {
		if h.Name.Clipped() || h.Value.Clipped() {
			return false
		}
	}
	return true
}

func redriveNote(subject string) string {
	if strings.HasPrefix(subject, "turn.approval.") {
		return "Publishes this answer again on " + subject + ". Its step was decided by it; the workers run the step again: " +
			"calls that ended are answered from the journal (not run twice), a call cut short while running is answered " +
			"interrupted (a read-only one runs again), and the step's call.output events and step.done follow."
	}
	return "Publishes this step again on " + subject + ", as it was. The workers handle it with a fresh delivery count: " +
		"calls that ran already are answered from the journal (never run twice), a call an attempt was running when it died " +
		"is answered interrupted (a read-only one runs again), the others run now; the step's events follow on its turn. " +
		"If it fails as often again, it is dead-lettered again."
}

// redrive publishes a dead-lettered step (or approval answer) again on
// its original subject, with its original headers, under a message id
// of its own so that a second click is dropped as a duplicate.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	seq, err := strconv.ParseUint(r.PostForm.Get("seq"), 10, 64)
	if err != nil {
		http.Error(w, "refused: seq must be a stream sequence", http.StatusBadRequest)
		return
	}
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		s.back(w, r, "/dead", "No dead letters stream: "+err.Error())
		return
	}
	m, err := st.GetMsg(ctx, seq)
	if err != nil {
		s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d is gone: %v", seq, err))
		return
	}
	d := deadLetter{Seq: seq, Subject: m.Subject, Headers: m.Header, Data: m.Data, Size: len(m.Data)}
	if !redrivable(d) {
		s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d may not be re-driven: only a step or answer that reached the delivery limit may be retried; a malformed one would be dead-lettered again.", seq))
		return
	}
	if !s.letterView(d, letterPayload, letterHeaders).whole() {
		s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d weighs more than its page shows whole: no page showed all of what a re-drive would publish, so it is not re-driven. Nothing sent.", seq))
		return
	}
	out := nats.NewMsg(d.Headers.Get(protocol.HeaderDeadSubject))
	out.Data = bytes.Clone(d.Data)
	for k, vals := range d.Headers {
		switch {
		case strings.HasPrefix(k, protocol.HeaderDeadPrefix+"Nats-"):
			if k == protocol.HeaderDeadPrefix+nats.MsgIdHdr {
				continue
			}
			out.Header[strings.TrimPrefix(k, protocol.HeaderDeadPrefix)] = vals
		case strings.HasPrefix(k, protocol.HeaderDeadPrefix), strings.HasPrefix(k, "Nats-"), k == "Turn-Delivered":
		default:
			out.Header[k] = vals
		}
	}
	id := fmt.Sprintf("redrive.%s.%d", d.Headers.Get(protocol.HeaderDeadStream), seq)
	out.Header.Set("Nats-Msg-Id", id)
	se := sessionOf(r)
	out.Header.Set("Console-Redriven-By", se.name)
	if _, err := s.js.PublishMsg(ctx, out); err != nil {
		s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d was not re-driven: %v", seq, err))
		return
	}
	s.audit(ctx, fmt.Sprintf("redrive.%d", seq), auditEntry{Kind: "redrive", By: se.name, At: time.Now().UTC(), MsgID: id, Subject: out.Subject, DeadSeq: seq})
	s.log.Info("console: dead letter re-driven", "operator", se.name, "seq", seq, "subject", out.Subject)
	s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d re-driven on %s (message id %s).", seq, out.Subject, id))
}
