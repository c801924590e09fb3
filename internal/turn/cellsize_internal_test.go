package turn

import (
	"testing"
	"unsafe"
)

// TestCellSizes holds a step's one allocation (newStepOut) in the size
// classes it was fitted to: eight running calls' cells with their stepOut
// and outcomes' room in 2,048 bytes (with the 8-byte header of an object
// of more than 512 bytes with pointers), which with 304-byte cells (an
// Outcome with its rare fields inline) took 2,688; a one-call step's in
// 384, which a step in flight keeps (480 before). A field added to the
// cell, Outcome, the lazy cancel or stepOut that takes a step to the next
// class fails it.
func TestCellSizes(t *testing.T) {
	cell, out, ptr := unsafe.Sizeof(cell{}), unsafe.Sizeof(stepOut{}), unsafe.Sizeof(&Outcome{})
	t.Logf("cell %d B (Outcome %d, lazyCancel %d), stepOut %d B, pending %d B, stepState %d B",
		cell, unsafe.Sizeof(Outcome{}), unsafe.Sizeof(lazyCancel{}), out, unsafe.Sizeof(pending{}), unsafe.Sizeof(stepState{}))
	if eight := 8 + out + smallStep*ptr + 8*cell; eight > 2048 {
		t.Errorf("an eight-call step's allocation is %d bytes, over the 2,048-byte size class", eight)
	}
	if one := out + ptr + cell; one > 384 {
		t.Errorf("a one-call step's allocation is %d bytes, over the 384-byte size class", one)
	}
}
