package turn

import (
	"testing"
	"unsafe"
)

// TestCellSizes holds a step's one allocation (newStepOut) in the size
// classes it was fitted to: eight running calls' cells with their stepOut
// and outcomes' room in 1,792 bytes (with the 8-byte header of an object
// of more than 512 bytes with pointers), which with 304-byte cells (an
// Outcome with its rare fields inline) took 2,688, and with 216-byte ones
// (the lazy cancel's cause an interface of its own, the progress func and
// state two fields) 2,048; a one-call step's in 352, which a step in
// flight keeps (480, then 384). A field added to the
// cell, Outcome, the lazy cancel or stepOut that takes a step to the next
// class fails it.
func TestCellSizes(t *testing.T) {
	cell, out, ptr := unsafe.Sizeof(cell{}), unsafe.Sizeof(stepOut{}), unsafe.Sizeof(&Outcome{})
	t.Logf("cell %d B (Outcome %d, lazyCancel %d), stepOut %d B, pending %d B, stepState %d B",
		cell, unsafe.Sizeof(Outcome{}), unsafe.Sizeof(lazyCancel{}), out, unsafe.Sizeof(pending{}), unsafe.Sizeof(stepState{}))
	if eight := 8 + out + smallStep*ptr + 8*cell; eight > 1792 {
		t.Errorf("an eight-call step's allocation is %d bytes, over the 1,792-byte size class", eight)
	}
	if one := out + ptr + cell; one > 352 {
		t.Errorf("a one-call step's allocation is %d bytes, over the 352-byte size class", one)
	}
}
