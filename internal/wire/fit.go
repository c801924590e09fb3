package wire

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/protocol"
)

// DroppedDetails replaces a tool's details that would not fit: what was
// left out, and how big it was.
type DroppedDetails struct {
	Dropped bool   `json:"dropped"`
	Bytes   int    `json:"bytes"`
	Note    string `json:"note"`
}

// FitCallOutput clips ev in place until its JSON encoding is at most budget
// bytes: details over an eighth of the budget are replaced by
// DroppedDetails, events, repairs and labels are bounded, and the error
// message and the output text are clipped (textclip.Text), the output
// keeping the larger part. It returns ErrTooLarge when even that
// does not fit.
func FitCallOutput(ev *protocol.CallOutput, budget int) error {
	size := jsonLen(ev)
	if size <= budget {
		return nil
	}
	if d := len(ev.Details); d > budget/8 {
		ev.Details = mustJSON(DroppedDetails{Dropped: true, Bytes: d, Note: "the details were too large for the event and were left out"})
	}
	if len(ev.Events) > 0 && jsonLen(ev.Events) > budget/16 {
		ev.Events = fitEvents(ev.Events, budget/16)
	}
	ev.Repairs = textclip.List(ev.Repairs, 20, 256)
	ev.Activity = textclip.Text(ev.Activity, 512)
	ev.Name, ev.Namespace = textclip.Text(ev.Name, 512), textclip.Text(ev.Namespace, 512)
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
	fixedLen := size - textclip.JSONLen(msg)
	if ok {
		fixedLen -= textclip.JSONLen(text)
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
		ev.Error = &protocol.CallError{Kind: ev.Error.Kind, Message: textclip.Text(msg, share)}
		room -= textclip.JSONLen(ev.Error.Message)
	}
	if ok {
		ev.Item = fixed(textclip.Text(text, room))
	}
	if size = jsonLen(ev); size > budget {
		return fmt.Errorf("%w: call.output of %d bytes, over %d", ErrTooLarge, size, budget)
	}
	return nil
}

// fitEvents keeps the first events that fit n bytes and says how many
// were left out in a last event of type "clipped".
func fitEvents(evs []protocol.PresentationEvent, n int) []protocol.PresentationEvent {
	keep := 0
	for used := 0; keep < len(evs); keep++ {
		used += jsonLen(evs[keep]) + 1
		if used > n {
			break
		}
	}
	out := slices.Clone(evs[:keep])
	return append(out, protocol.PresentationEvent{Type: "clipped", Data: mustJSON(map[string]int{"left_out": len(evs) - keep})})
}

// FitStepDone clips the items of ev until its encoding is at most budget bytes,
// splitting the budget fairly: items smaller than the share are kept
// whole, larger ones clipped to it (textclip.Text on their output), none
// dropped. It returns ErrTooLarge when even items holding nothing but a
// note do not fit.
func FitStepDone(ev *protocol.StepDone, budget int) error {
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
	if json.Unmarshal(item, &fo) != nil || fo.Type != protocol.ItemFunctionCallOutput {
		return "", nil, false
	}
	if json.Unmarshal(fo.Output, &text) == nil {
		return text, func(s string) json.RawMessage {
			b, _ := json.Marshal(protocol.FunctionCallOutput{Type: fo.Type, CallID: fo.CallID, Output: s})
			return b
		}, true
	}
	var full protocol.FunctionCallOutput
	if json.Unmarshal(item, &full) != nil {
		return "", nil, false
	}
	k := -1
	for i, c := range full.Content {
		if c.Type == protocol.ContentText && (k < 0 || len(c.Text) > len(full.Content[k].Text)) {
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
	return len(with(textclip.Text(text, 0)))
}

// clipItem clips item's output text so that the item is at most n bytes.
func clipItem(item json.RawMessage, n int) json.RawMessage {
	text, with, ok := itemText(item)
	if !ok {
		return item
	}
	fixed := len(with(""))
	return with(textclip.Text(text, n-fixed))
}

// mediaOutput parses item when it is a function_call_output whose output
// is an array.
func mediaOutput(item json.RawMessage) (*protocol.FunctionCallOutput, bool) {
	if !bytes.Contains(item, []byte(`"output":[`)) {
		return nil, false
	}
	var fo protocol.FunctionCallOutput
	if json.Unmarshal(item, &fo) != nil || fo.Type != protocol.ItemFunctionCallOutput || len(fo.Content) == 0 {
		return nil, false
	}
	return &fo, true
}

// mediaItems are the media parts of some items, to be replaced by their
// notes largest first.
type mediaItems struct {
	outs  map[int]*protocol.FunctionCallOutput
	notes map[int][]string
	refs  []mediaRef
}

type mediaRef struct{ item, part, size int }

func (m *mediaItems) add(i int, fo *protocol.FunctionCallOutput, notes []string) {
	if m.outs == nil {
		m.outs, m.notes = map[int]*protocol.FunctionCallOutput{}, map[int][]string{}
	}
	m.outs[i], m.notes[i] = fo, notes
	for j, c := range fo.Content {
		if c.Type == protocol.ContentImage || c.Type == protocol.ContentFile {
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
		note := protocol.InputContent{Type: protocol.ContentText, Text: partNote(m.notes[r.item], r.part, part)}
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
func mustItem(fo *protocol.FunctionCallOutput) json.RawMessage {
	hasMedia := false
	texts := make([]string, 0, len(fo.Content))
	for _, c := range fo.Content {
		hasMedia = hasMedia || c.Type != protocol.ContentText
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
func partNote(notes []string, j int, c protocol.InputContent) string {
	if j < len(notes) && notes[j] != "" {
		return notes[j]
	}
	url, name := c.ImageURL, ""
	if c.Type == protocol.ContentFile {
		url, name = c.FileData, c.Filename
	}
	mime, b64, _ := strings.Cut(strings.TrimPrefix(url, "data:"), ";base64,")
	return textclip.StepNote(name, "", mime, base64.StdEncoding.DecodedLen(len(b64)))
}

func jsonLen(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values of this package's own types
	}
	return b
}

// FitWorkflowEvent clips ev's texts until its encoding is at most budget
// bytes (the publisher calls it for an event over the server's max
// payload): the reason, the instructions and the title. A result is never clipped, as
// its value is the task's answer; results are bounded when submitted
// (workflowtask.Config.MaxResultBytes), well below any max payload.
func FitWorkflowEvent(ev *protocol.WorkflowEvent, budget int) error {
	ev.Reason = textclip.Reason(ev.Reason)
	ev.Title = textclip.Text(ev.Title, 1<<10)
	ev.Instructions = textclip.Text(ev.Instructions, budget/4)
	if size := jsonLen(ev); size > budget {
		return fmt.Errorf("%w: %s of %s is %d bytes, over %d", ErrTooLarge, ev.Type, ev.WorkflowID, size, budget)
	}
	return nil
}

// Fit clips v in place until its encoding is at most budget bytes, when
// v is an event that can be clipped (a *CallOutput, *StepDone or
// *WorkflowEvent of protocol): ok is false for any other v, which is
// left as it is. err wraps ErrTooLarge when even clipped v does
// not fit.
func Fit(v any, budget int) (ok bool, err error) {
	switch v := v.(type) {
	case *protocol.CallOutput:
		return true, FitCallOutput(v, budget)
	case *protocol.StepDone:
		return true, FitStepDone(v, budget)
	case *protocol.WorkflowEvent:
		return true, FitWorkflowEvent(v, budget)
	}
	return false, nil
}
