package turn

import (
	"testing"
	"unsafe"
)

// TestCellSizes holds a step's one allocation (newStepOut) in the size
// classes it was fitted to: eight running calls' cells with their stepOut
// and outcomes' room in 2,688 bytes (with the 8-byte header of an object
// of more than 512 bytes with pointers), which with 344-byte cells took
// 3,072; a one-call step's in 480, which a step in flight keeps. A field
// added to the cell, Outcome, the lazy cancel or stepOut that takes a
// step to the next class fails it.
func TestCellSizes(t *testing.T) {
	cell, out, ptr := unsafe.Sizeof(cell{}), unsafe.Sizeof(stepOut{}), unsafe.Sizeof(&Outcome{})
	t.Logf("cell %d B (Outcome %d, lazyCancel %d), stepOut %d B, pending %d B, stepState %d B",
		cell, unsafe.Sizeof(Outcome{}), unsafe.Sizeof(lazyCancel{}), out, unsafe.Sizeof(pending{}), unsafe.Sizeof(stepState{}))
	if eight := 8 + out + smallStep*ptr + 8*cell; eight > 2688 {
		t.Errorf("an eight-call step's allocation is %d bytes, over the 2,688-byte size class", eight)
	}
	if one := out + ptr + cell; one > 480 {
		t.Errorf("a one-call step's allocation is %d bytes, over the 480-byte size class", one)
	}
}
