package protocol

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/tools"
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

// DroppedDetails replaces a tool's details that would not fit: what was
// left out, and how big it was.
type DroppedDetails struct {
	Dropped bool   `json:"dropped"`
	Bytes   int    `json:"bytes"`
	Note    string `json:"note"`
}

// Fit clips ev in place until its JSON encoding is at most budget bytes:
// details over an eighth of the budget are replaced by DroppedDetails,
// events, repairs and labels are bounded, and the error message and the
// output text are clipped (ClipText), the output keeping the larger part.
// It returns ErrTooLarge when even that does not fit.
func (ev *CallOutput) Fit(budget int) error {
	size := jsonLen(ev)
	if size <= budget {
		return nil
	}
	if d := jsonLen(ev.Details); d > budget/8 {
		ev.Details = DroppedDetails{Dropped: true, Bytes: d, Note: "the details were too large for the event and were left out"}
	}
	if len(ev.Events) > 0 && jsonLen(ev.Events) > budget/16 {
		ev.Events = fitEvents(ev.Events, budget/16)
	}
	ev.Repairs = ClipList(ev.Repairs, 20, 256)
	ev.Activity = ClipText(ev.Activity, 512)
	ev.Name, ev.Namespace = ClipText(ev.Name, 512), ClipText(ev.Namespace, 512)
	if size = jsonLen(ev); size <= budget {
		return nil
	}
	// Media go before text: notes in their place, largest first.
	if fo, ok := mediaOutput(ev.Item); ok {
		var it mediaItems
		it.add(0, fo, ev.MediaNotes)
		if item, ok := it.drop(size - budget)[0]; ok {
			ev.Item = item
		}
		if size = jsonLen(ev); size <= budget {
			return nil
		}
	}
	// What the two texts may use between them.
	msg := ""
	if ev.Error != nil {
		msg = ev.Error.Message
	}
	text, fixed, ok := itemText(ev.Item)
	fixedLen := size - encodedLen(msg)
	if ok {
		fixedLen -= encodedLen(text)
	}
	room := budget - fixedLen
	if room < 0 {
		return fmt.Errorf("%w: call.output of %d bytes without its texts, over %d", ErrTooLarge, fixedLen, budget)
	}
	if ev.Error != nil {
		// The output text repeats the message for the model; the message
		// is the gateway's summary, so a quarter is plenty.
		share := room / 4
		if !ok {
			share = room
		}
		// A copy: the error may be shared with the outcome it came from.
		ev.Error = &tools.Error{Kind: ev.Error.Kind, Message: ClipText(msg, share)}
		room -= encodedLen(ev.Error.Message)
	}
	if ok {
		ev.Item = fixed(ClipText(text, room))
	}
	if size = jsonLen(ev); size > budget {
		return fmt.Errorf("%w: call.output of %d bytes, over %d", ErrTooLarge, size, budget)
	}
	return nil
}

// fitEvents keeps the first events that fit n bytes and says how many
// were left out in a last event of type "clipped".
func fitEvents(evs []tools.Event, n int) []tools.Event {
	keep := 0
	for used := 0; keep < len(evs); keep++ {
		used += jsonLen(evs[keep]) + 1
		if used > n {
			break
		}
	}
	out := slices.Clone(evs[:keep])
	return append(out, tools.Event{Type: "clipped", Data: map[string]int{"left_out": len(evs) - keep}})
}

// Fit clips the items of ev until its encoding is at most budget bytes,
// splitting the budget fairly: items smaller than the share are kept
// whole, larger ones clipped to it (ClipText on their output), none
// dropped. It returns ErrTooLarge when even items holding nothing but a
// note do not fit.
func (ev *StepDone) Fit(budget int) error {
	size := jsonLen(ev)
	if size <= budget {
		return nil
	}
	items := ev.Items
	if len(items) == 0 {
		return fmt.Errorf("%w: step.done of %d bytes without items, over %d", ErrTooLarge, size, budget)
	}
	// Media go first, largest first across the step, each replaced by its
	// note, so that as many as fit stay whole; texts are clipped only
	// when no media are left.
	var ms mediaItems
	for i, it := range items {
		if fo, ok := mediaOutput(it); ok {
			var notes []string
			if i < len(ev.MediaNotes) {
				notes = ev.MediaNotes[i]
			}
			ms.add(i, fo, notes)
		}
	}
	if len(ms.refs) > 0 {
		items = slices.Clone(items)
		for i, it := range ms.drop(size - budget) {
			items[i] = it
		}
		ev.Items = items
		if size = jsonLen(ev); size <= budget {
			return nil
		}
	}
	ev.Items = []json.RawMessage{}
	avail := budget - jsonLen(ev) - max(len(items)-1, 0)
	ev.Items = items
	sizes := make([]int, len(items))
	floors := make([]int, len(items))
	for i, it := range items {
		sizes[i] = len(it)
		floors[i] = min(sizes[i], minItemLen(it))
	}
	total := func(level int) int {
		t := 0
		for i := range sizes {
			t += max(floors[i], min(sizes[i], level))
		}
		return t
	}
	if total(0) > avail {
		return fmt.Errorf("%w: step.done with %d items needs at least %d bytes, over %d", ErrTooLarge, len(items), total(0)+budget-avail, budget)
	}
	// The largest level at which everything fits; clipping to it can
	// land a few bytes over (a character is not cut), which the next
	// round takes off the level.
	for range 8 {
		lo, hi := 0, slices.Max(sizes)
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if total(mid) <= avail {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		out := make([]json.RawMessage, len(items))
		for i, it := range items {
			out[i] = it
			if sizes[i] > lo {
				out[i] = clipItem(it, max(lo, floors[i]))
			}
		}
		ev.Items = out
		if size = jsonLen(ev); size <= budget {
			return nil
		}
		avail -= size - budget
	}
	return fmt.Errorf("%w: step.done of %d bytes, over %d", ErrTooLarge, size, budget)
}

// MinStepDoneBytes is the smallest step.done st can have: every output
// item clipped to a note (see StepDone.Fit). A step whose floor is over
// the budget cannot be answered and is refused before anything runs.
func MinStepDoneBytes(st *Step) int {
	ev := StepDone{Type: EventStepDone, AgentID: st.AgentID, TurnID: st.TurnID, Step: st.Step, Items: []json.RawMessage{}}
	n := jsonLen(ev)
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

// itemText reads a function_call_output item: its output text, and a
// function that builds the item again with another text. ok is false for
// any other item. For an array output the text is its longest text part
// (the tool's own text, as a rule), and the rest of the array, media
// included, is kept as it is.
func itemText(item json.RawMessage) (text string, with func(string) json.RawMessage, ok bool) {
	var fo struct {
		Type   string          `json:"type"`
		CallID string          `json:"call_id"`
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(item, &fo) != nil || fo.Type != ItemFunctionCallOutput {
		return "", nil, false
	}
	if json.Unmarshal(fo.Output, &text) == nil {
		return text, func(s string) json.RawMessage {
			b, _ := json.Marshal(FunctionCallOutput{Type: fo.Type, CallID: fo.CallID, Output: s})
			return b
		}, true
	}
	var full FunctionCallOutput
	if json.Unmarshal(item, &full) != nil {
		return "", nil, false
	}
	k := -1
	for i, c := range full.Content {
		if c.Type == ContentText && (k < 0 || len(c.Text) > len(full.Content[k].Text)) {
			k = i
		}
	}
	if k >= 0 {
		text = full.Content[k].Text
	}
	return text, func(s string) json.RawMessage {
		out := full
		out.Content = slices.Clone(full.Content)
		if k >= 0 {
			out.Content[k].Text = s
		}
		return mustItem(&out)
	}, true
}

// minItemLen is the length of item with nothing but a note left.
func minItemLen(item json.RawMessage) int {
	text, with, ok := itemText(item)
	if !ok {
		return len(item)
	}
	return len(with(ClipText(text, 0)))
}

// clipItem clips item's output text so that the item is at most n bytes.
func clipItem(item json.RawMessage, n int) json.RawMessage {
	text, with, ok := itemText(item)
	if !ok {
		return item
	}
	fixed := len(with(""))
	return with(ClipText(text, n-fixed))
}

func jsonLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// mediaOutput parses item when it is a function_call_output whose output
// is an array.
func mediaOutput(item json.RawMessage) (*FunctionCallOutput, bool) {
	if !bytes.Contains(item, []byte(`"output":[`)) {
		return nil, false
	}
	var fo FunctionCallOutput
	if json.Unmarshal(item, &fo) != nil || fo.Type != ItemFunctionCallOutput || len(fo.Content) == 0 {
		return nil, false
	}
	return &fo, true
}

// mediaItems are the media parts of some items, to be replaced by their
// notes largest first.
type mediaItems struct {
	outs  map[int]*FunctionCallOutput
	notes map[int][]string
	refs  []mediaRef
}

type mediaRef struct{ item, part, size int }

func (m *mediaItems) add(i int, fo *FunctionCallOutput, notes []string) {
	if m.outs == nil {
		m.outs, m.notes = map[int]*FunctionCallOutput{}, map[int][]string{}
	}
	m.outs[i], m.notes[i] = fo, notes
	for j, c := range fo.Content {
		if c.Type == ContentImage || c.Type == ContentFile {
			m.refs = append(m.refs, mediaRef{i, j, len(c.ImageURL) + len(c.FileData)})
		}
	}
}

// drop replaces media parts, largest first, by their notes until over
// bytes have been saved or none is left, and returns the items it
// changed, encoded again: an item left with no media has a string output,
// its texts joined with newlines.
func (m *mediaItems) drop(over int) map[int]json.RawMessage {
	slices.SortStableFunc(m.refs, func(a, b mediaRef) int { return b.size - a.size })
	changed := map[int]json.RawMessage{}
	for _, r := range m.refs {
		if over <= 0 {
			break
		}
		fo := m.outs[r.item]
		part := fo.Content[r.part]
		note := InputContent{Type: ContentText, Text: partNote(m.notes[r.item], r.part, part)}
		if jsonLen(note) >= jsonLen(part) {
			// A medium no larger than its note stays: the text is
			// clipped instead.
			continue
		}
		before := len(mustItem(fo))
		fo.Content[r.part] = note
		after := mustItem(fo)
		changed[r.item] = after
		over -= before - len(after)
	}
	return changed
}

// mustItem encodes fo, as a string output once it holds no media.
func mustItem(fo *FunctionCallOutput) json.RawMessage {
	hasMedia := false
	texts := make([]string, 0, len(fo.Content))
	for _, c := range fo.Content {
		hasMedia = hasMedia || c.Type != ContentText
		texts = append(texts, c.Text)
	}
	out := *fo
	if !hasMedia {
		out.Content, out.Output = nil, strings.Join(texts, "\n")
	}
	b, _ := json.Marshal(out)
	return b
}

// partNote is the note that replaces part j: the one its builder wrote,
// else one made from the part itself.
func partNote(notes []string, j int, c InputContent) string {
	if j < len(notes) && notes[j] != "" {
		return notes[j]
	}
	url, name := c.ImageURL, ""
	if c.Type == ContentFile {
		url, name = c.FileData, c.Filename
	}
	mime, b64, _ := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
	return media.StepNote(media.Item{Filename: name}, mime, base64.StdEncoding.DecodedLen(len(b64)))
}
