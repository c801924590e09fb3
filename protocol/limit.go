package protocol

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Size limits (docs/protocol.md, "Size limits"). Every event the worker
// publishes must fit the server's max payload, which the connection
// reports; the budget of an event's body is that minus its headers and a
// margin.
const (
	// HeaderRoom is what EventBudget leaves for an event's headers (its
	// message id is at most ~420 bytes, trace context ~600) and for the
	// few bytes a journal record adds around an outcome.
	HeaderRoom = 4 << 10
	// Margin is left below the max payload after the exact headers, so
	// that a server whose limit counts a few bytes differently still
	// takes the message.
	Margin = 256
	// MaxReasonBytes bounds a cancel reason (and any reason quoted into
	// every output of a turn).
	MaxReasonBytes = 1 << 10
	// MaxNoteBytes bounds one note of a catalog reply; MaxNotes their
	// number.
	MaxNoteBytes = 512
	MaxNotes     = 50
	// MaxErrorBytes bounds the description of a micro error reply, which
	// travels in a header.
	MaxErrorBytes = 2 << 10
)

// ErrTooLarge is wrapped by the error of a message that does not fit the
// server's max payload, even clipped; it is never worth retrying.
var ErrTooLarge = errors.New("message exceeds the server's max payload")

// EventBudget is the largest body of an event on a connection whose max
// payload is maxPayload, before the event's exact headers are known.
func EventBudget(maxPayload int64) int {
	return max(int(maxPayload)-HeaderRoom-Margin, 1<<10)
}

// clipNote is the note put where text was left out. It is plain ASCII
// but for the ellipsis, so its encoded length is its length.
func clipNote(n int) string { return "[… " + strconv.Itoa(n) + " bytes left out …]" }

// ClipText shortens s, when its JSON encoding is longer than n bytes, to
// its head and tail around a note saying how many bytes were left out;
// the encoding of the result is at most n bytes (the note alone when n
// leaves no room for text). Cuts fall on character boundaries.
func ClipText(s string, n int) string {
	if encodedLen(s) <= n {
		return s
	}
	note := clipNote(len(s))
	room := n - len(note) - 4 // the newlines around the note, escaped
	if room <= 0 {
		return clipNote(len(s))
	}
	headRoom := room * 2 / 3
	head := prefixWithin(s, headRoom)
	tail := suffixWithin(s[head:], room-encodedLen(s[:head]))
	return s[:head] + "\n" + clipNote(len(s)-head-tail) + "\n" + s[len(s)-tail:]
}

// ClipReason bounds a reason quoted into outputs (a cancel's).
func ClipReason(s string) string { return ClipText(s, MaxReasonBytes) }

// ClipList keeps the first maxItems of list, each clipped to each bytes
// (ClipText), and ends it with "and N more" when any were left out.
func ClipList(list []string, maxItems, each int) []string {
	if len(list) <= maxItems {
		var long bool
		for _, s := range list {
			long = long || encodedLen(s) > each
		}
		if !long {
			return list
		}
	}
	out := make([]string, 0, min(len(list), maxItems)+1)
	for _, s := range list[:min(len(list), maxItems)] {
		out = append(out, ClipText(s, each))
	}
	if len(list) > maxItems {
		out = append(out, fmt.Sprintf("and %d more", len(list)-maxItems))
	}
	return out
}

// encodedLen is the length of s inside a JSON string, as encoding/json
// writes it (HTML characters, U+2028/U+2029 and invalid bytes escaped).
func encodedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		w, size := runeEncodedLen(s[i:])
		n += w
		i += size
	}
	return n
}

func runeEncodedLen(s string) (encoded, size int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			return 2, 1
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return size, size
}

// prefixWithin is the length in bytes of the longest prefix of s whose
// encoding fits n bytes.
func prefixWithin(s string, n int) int {
	used, i := 0, 0
	for i < len(s) {
		w, size := runeEncodedLen(s[i:])
		if used+w > n {
			break
		}
		used += w
		i += size
	}
	return i
}

// suffixWithin is the length in bytes of the longest suffix of s whose
// encoding fits n bytes.
func suffixWithin(s string, n int) int {
	used, j := 0, len(s)
	for j > 0 {
		_, size := utf8.DecodeLastRuneInString(s[:j])
		w, _ := runeEncodedLen(s[j-size : j])
		if used+w > n {
			break
		}
		used += w
		j -= size
	}
	return len(s) - j
}

// MinStepDoneBytes is the smallest step.done st can have: every output
// item clipped to a note, as the worker clips them. A step whose floor is over
// the budget cannot be answered and is refused before anything runs.
func MinStepDoneBytes(st *Step) int {
	// The step.done without items, as json.Marshal writes it; counted,
	// not encoded: this runs for every step.
	var digits [20]byte
	n := len(`{"type":"`+EventStepDone+`","agent_id":"","turn_id":"","step":,"items":[],"end_turn":false,"complete_actor_event":false,"task":null}`) +
		encodedLen(st.AgentID) + encodedLen(st.TurnID) + len(strconv.AppendInt(digits[:0], st.Step, 10))
	// An output's note is counted for an output of up to a MiB: one
	// larger has a digit more in its note, which the margin covers.
	fo := len(`{"type":"function_call_output","call_id":"","output":""}`) + len(clipNote(1<<20))
	ts := len(`{"type":"tool_search_output","call_id":"","execution":"client","status":"completed","tools":[]}`)
	for _, c := range st.Calls {
		n += encodedLen(c.CallID) + 1
		if c.Type == ItemToolSearchCall {
			n += ts
		} else {
			n += fo
		}
	}
	return n
}
