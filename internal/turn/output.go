package turn

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/tools"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// bound clips p's outcome to MaxEventBytes. Outcomes far below the
// budget, the common case, are recognised without encoding them.
func (d *Dispatcher) bound(p *pending) {
	o, budget := p.outcome, d.MaxEventBytes
	if budget <= 0 || o.bounded {
		return
	}
	o.bounded = true
	size := len(o.Item) + len(o.Activity) + len(o.Name) + len(o.Namespace) + len(o.CallID)
	if o.Err != nil {
		size += len(o.Err.Message)
	}
	for _, r := range o.Repairs() {
		size += len(r)
	}
	// The media notes travel in the journal's record beside the item, not
	// in the event: the event is fitted to what they leave.
	notes := 0
	for _, n := range o.MediaNotes() {
		notes += len(n) + 3
	}
	budget -= notes
	size += notes
	if size < budget/4 && o.Details == nil && o.Events() == nil {
		return
	}
	ev := o.event(p.ref())
	if err := wire.FitCallOutput(ev, budget); err != nil {
		d.logger().Warn("a call's outcome does not fit one event even clipped", "call_id", o.CallID, "err", err)
	}
	if o.Err != nil && ev.Error.Message != o.Err.Message {
		// A copy: the error may be shared with the outcome it came from.
		o.Err = &tool.Error{Kind: o.Err.Kind, Message: ev.Error.Message}
	}
	if o.Details != nil {
		o.Details = ev.Details
	}
	o.Item, o.Activity = ev.Item, ev.Activity
	if ev.Events != nil || ev.Repairs != nil || o.More != nil {
		m := o.more()
		m.Events, m.Repairs = ev.Events, ev.Repairs
	}
	if o.More != nil && !bytes.Contains(o.Item, []byte(`"output":[`)) {
		o.More.MediaNotes = nil // the media are gone: nothing left to note
	}
}

// outcome builds, in p's cell, the outcome of a call that ran. The cell
// is zero: the fields are set one by one, those that stay zero not at all
// (assigning a whole Outcome goes through the write barrier for every
// pointer in it).
func (d *Dispatcher) outcome(p *pending, res *tool.Result, err error, took time.Duration) *Outcome {
	c := p.cell
	o := &c.out
	o.Name, o.Ran, o.Duration = p.call.Name, true, took // CallID is set as the call starts (invoke)
	if p.call.Namespace != "" {
		o.Namespace = p.call.Namespace
	}
	if p.invocation.Repairs != nil {
		o.more().Repairs = p.invocation.Repairs
	}
	if res.Details != nil {
		o.Details = res.Details
	}
	if res.Events != nil {
		o.more().Events = res.Events
	}
	var notes []string
	if err != nil {
		o.Err = tools.Classify(err, c, p.st.ctx, p.timeout)
		o.Item, notes = d.outputItem(p.st, p.call.CallID, tools.FailureText(o.Err, res.Content), res.Media)
		if notes != nil {
			o.more().MediaNotes = notes
		}
		if a := p.invocation.Activity; a != "" {
			o.Activity = a
		}
		return o
	}
	o.EndTurn, o.Complete = res.EndTurn, res.CompleteActorEvent
	o.Item, notes = d.outputItem(p.st, p.call.CallID, res.Content, res.Media)
	if notes != nil {
		o.more().MediaNotes = notes
	}
	if a := p.invocation.CompletedActivity(*res); a != "" {
		o.Activity = a
	}
	return o
}

func errorOutcome(c protocol.CallItem, e *tool.Error) *Outcome {
	o := &Outcome{CallID: c.CallID, Name: c.Name, Namespace: c.Namespace, Err: e}
	if c.Type == protocol.ItemToolSearchCall {
		o.Item = mustJSON(protocol.ToolSearchOutput{Type: protocol.ItemToolSearchOutput, CallID: c.CallID, Execution: "client", Status: "completed", Tools: []json.RawMessage{}})
	} else {
		o.Item = wire.FunctionOutput(c.CallID, tools.FailureText(e, ""))
	}
	return o
}

// outputItem builds the function_call_output of a call that ran, the one
// place that does: text alone is a string (wire.FunctionOutput); with media it
// is an array of the text, then each medium fitted to the media budget
// (an input_image, an input_file, or the input_text note that replaced
// it), with the notes that would replace them later. Media that all came
// back as notes leave a string again. The fitting runs after the call's
// time (the tool has returned) but stops with the turn (ctx): an aborted
// turn's step does not wait for images to be decoded.
func (d *Dispatcher) outputItem(st *stepState, callID, text string, ms []tool.Media) (json.RawMessage, []string) {
	if len(ms) == 0 {
		return functionOutput(st, callID, text), nil
	}
	ctx := st.ctx
	items := make([]media.Item, len(ms))
	for i, m := range ms {
		items[i] = media.Item(m)
	}
	fo := protocol.FunctionCallOutput{Type: protocol.ItemFunctionCallOutput, CallID: callID}
	var notes, texts []string
	if text != "" {
		fo.Content = append(fo.Content, protocol.InputContent{Type: protocol.ContentText, Text: text})
		notes, texts = append(notes, ""), append(texts, text)
	}
	kept := false
	for _, p := range media.Fit(ctx, items, d.mediaBudget(), media.Options{Slots: d.MediaSlots}) {
		c := protocol.InputContent{Type: protocol.ContentText, Text: p.Text}
		switch p.Kind {
		case media.Image:
			c = protocol.InputContent{Type: protocol.ContentImage, ImageURL: p.URL, Detail: protocol.DetailAuto}
		case media.File:
			c = protocol.InputContent{Type: protocol.ContentFile, Filename: p.Filename, FileData: p.URL}
		default:
			texts = append(texts, p.Text)
		}
		kept = kept || p.Kind != media.Text
		fo.Content, notes = append(fo.Content, c), append(notes, p.Note)
	}
	if !kept {
		return wire.FunctionOutput(callID, strings.Join(texts, "\n")), nil
	}
	return mustJSON(fo), notes
}

func (d *Dispatcher) mediaBudget() int {
	b := d.MediaBudget
	if b <= 0 {
		b = media.DefaultBudget
	}
	if d.MaxEventBytes > 0 {
		b = min(b, d.MaxEventBytes/2)
	}
	return b
}

// functionOutput is wire.FunctionOutput, byte for byte
// (FuzzFunctionOutputAgrees): an id and a text of printable ASCII that
// needs no escape, a no-op tool's, are copied into an item of exactly
// their size, with no encoder's appends. Counting and escaping the two
// strings byte by byte was a twentieth of a no-op step.
func functionOutput(st *stepState, callID, text string) json.RawMessage {
	if !plainJSON(callID) || !plainJSON(text) {
		return wire.FunctionOutput(callID, text)
	}
	b := st.itemBytes(len(itemHead) + len(callID) + len(itemMid) + len(text) + len(itemTail))
	// The fixed parts are array assignments, a few moves each, where a
	// copy is a call to memmove.
	*(*[len(itemHead)]byte)(b) = itemHeadBytes
	n := len(itemHead) + copy(b[len(itemHead):], callID)
	*(*[len(itemMid)]byte)(b[n:]) = itemMidBytes
	n += len(itemMid)
	n += copy(b[n:], text)
	b[n], b[n+1] = '"', '}'
	return b
}

// itemHeadBytes and itemMidBytes are itemHead and itemMid as arrays,
// read only.
var (
	itemHeadBytes = [len(itemHead)]byte([]byte(itemHead))
	itemMidBytes  = [len(itemMid)]byte([]byte(itemMid))
)

// The parts of a function_call_output item around its id and its text.
const (
	itemHead = `{"type":"function_call_output","call_id":"`
	itemMid  = `","output":"`
	itemTail = `"}` // written as its two bytes
)

// plainJSON reports whether s is written into a JSON string as it is:
// printable ASCII (DEL included, as encoding/json writes it) without
// '"', '\' or HTML's '<', '>' and '&'.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		var plain uint64
		switch {
		case c < 64:
			plain = plainLow >> c
		case c < 128:
			plain = plainHigh >> (c - 64)
		}
		if plain&1 == 0 {
			return false
		}
	}
	return true
}

// plainLow and plainHigh have a bit set for each byte below 64 and from
// 64 to 127 that JSON strings hold unescaped.
const (
	plainLow  uint64 = 0xffff_ffff_0000_0000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>')
	plainHigh uint64 = 0xffff_ffff_ffff_ffff &^ (1 << ('\\' - 64))
)

// itemBytes returns n bytes for an output item of the step. The items of
// a step of several running calls share one allocation, the step's slab,
// where they were an allocation each: eight of a no-op step's nine. The
// first call to end with a short item makes it, sized for that item in
// every running call (a step's items are most often alike) and rounded
// up to its size class; an item that does not fit, or that ends while the
// slab is being made, is an allocation of its own. An item is capped at
// its length: appending to it never reaches the next.
func (st *stepState) itemBytes(n int) []byte {
	if st.itemsFor == 0 || n > maxSlabItem {
		return make([]byte, n)
	}
	if st.itemsUsed.Load()&slabReady == 0 {
		if !st.itemsUsed.CompareAndSwap(0, slabMaking) {
			return make([]byte, n) // another call is making it
		}
		b := append([]byte(nil), make([]byte, n*int(st.itemsFor))...)
		st.items = b[:cap(b)]
		st.itemsUsed.Store(slabReady) // publishes items
	}
	end := int(st.itemsUsed.Add(int32(n)) &^ slabReady)
	if end > len(st.items) {
		return make([]byte, n)
	}
	return st.items[end-n : end : end]
}

// The flags of stepState.itemsUsed.
const (
	slabMaking = 1 << 30
	slabReady  = 1 << 29
)

// maxSlabItem bounds the items a step's slab holds, and so the slab
// (16 KiB for the most calls a pooled state has): a large output is an
// allocation of its own.
const maxSlabItem = 256
