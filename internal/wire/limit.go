package wire

import "errors"

// The worker's own bounds of what it writes (docs/protocol.md, "Size
// limits"); the budget of an event is protocol's (EventBudget, Margin),
// which a gateway checks a step against too.
const (
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
