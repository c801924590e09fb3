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

	"github.com/agentbull/toolruntime/protocol"
)

type deadLetter struct {
	Seq     uint64
	Time    time.Time
	Subject string
	Headers nats.Header
	Data    []byte
}

// deadLetters reads the last limit messages of TURN_DEAD, newest first.
func (s *Server) deadLetters(ctx context.Context, limit int) []deadLetter {
	st, err := s.js.Stream(ctx, protocol.StreamDead)
	if err != nil {
		return nil
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil
	}
	var out []deadLetter
	for seq := info.State.LastSeq; seq >= info.State.FirstSeq && seq > 0 && len(out) < limit; seq-- {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		out = append(out, deadLetter{Seq: m.Sequence, Time: m.Time, Subject: m.Subject, Headers: m.Header, Data: m.Data})
	}
	return out
}

// redrivable is what may be published again: a step or an approval
// message that reached the delivery limit. A malformed one would only
// be dead-lettered again.
func redrivable(d deadLetter) bool {
	subj := d.Headers.Get(protocol.HeaderDeadSubject)
	return strings.HasPrefix(d.Headers.Get(protocol.HeaderDeadReason), "delivery limit reached") &&
		(strings.HasPrefix(subj, "turn.call.") || strings.HasPrefix(subj, "turn.task.") || strings.HasPrefix(subj, "turn.approval."))
}

type deadView struct {
	Letters []deadLetterView
	Error   string
}

type deadLetterView struct {
	Seq                     uint64
	Time                    time.Time
	Subject, Reason, Origin string
	Headers                 []headerView
	Payload                 []argLine
	Bytes                   int
	Redrive                 bool
	RedriveNote             string
}

type headerView struct{ Name, Value string }

func (s *Server) deadPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	var v deadView
	if _, err := s.js.Stream(ctx, protocol.StreamDead); err != nil {
		v.Error = fmt.Sprintf("stream %s: %v (is a worker running?)", protocol.StreamDead, err)
	}
	for _, d := range s.deadLetters(ctx, 100) {
		dv := deadLetterView{Seq: d.Seq, Time: d.Time.UTC(), Subject: d.Subject, Reason: d.Headers.Get(protocol.HeaderDeadReason),
			Origin: d.Headers.Get(protocol.HeaderDeadSubject), Bytes: len(d.Data), Redrive: redrivable(d)}
		names := make([]string, 0, len(d.Headers))
		for k := range d.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			for _, val := range d.Headers[k] {
				dv.Headers = append(dv.Headers, headerView{k, val})
			}
		}
		if json.Valid(d.Data) {
			dv.Payload = formatArgs(d.Data)
		} else {
			dv.Payload = formatText(d.Data)
		}
		if dv.Redrive {
			dv.RedriveNote = redriveNote(dv.Origin)
		}
		v.Letters = append(v.Letters, dv)
	}
	s.render(w, "dead.html", s.page(r, "dead", "Dead letters", v))
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

// formatText shows bytes that are not JSON as lines of text (invalid
// UTF-8 replaced), folded like arguments.
func formatText(b []byte) []argLine {
	return foldLines(strings.ToValidUTF8(string(b), "\uFFFD"))
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
	d := deadLetter{Seq: seq, Subject: m.Subject, Headers: m.Header, Data: m.Data}
	if !redrivable(d) {
		s.back(w, r, "/dead", fmt.Sprintf("Dead letter %d may not be re-driven: only a step or answer that reached the delivery limit may be retried; a malformed one would be dead-lettered again.", seq))
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
