package turn

// reset empties a step's record for the next step, as clear would, but
// writing only the fields that are set. While the collector marks, every
// pointer a step writes goes through the write barrier: clearing the
// records whole (clear(st.calls)) took the bulk barrier over every
// pointer slot of every record, nil or not, and the write barrier's
// buffer flushes it fills were a visible share of a no-op step's time
// (an eighth of it, with the barriers of the other writes, where Eino's
// ToolsNode spends a fortieth). TestPendingReset fills every field and
// checks that none is left. The record's st stays, set once for the
// state's life, and so does its invocation's parked parameters' storage.
func (p *pending) reset() {
	if p.call != nil {
		p.call = nil
	}
	if len(p.digest) != 0 {
		p.digest = ""
	}
	// The invocation keeps its parameters' storage, emptied, for the
	// next step's call in this place (tools.Invocation.Park): the rest of
	// it is zero.
	p.invocation.Park()
	p.timeout = 0
	p.search, p.record, p.parallel = false, false, false
	if p.outcome != nil {
		p.outcome = nil
	}
	if p.span != nil {
		p.span = nil
	}
	if p.cell != nil {
		p.cell = nil
	}
	p.began, p.end = 0, 0
	p.finished.Store(false)
	p.running, p.expired = false, false
}
