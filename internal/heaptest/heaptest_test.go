package heaptest_test

import (
	"testing"

	"github.com/agentbull/toolruntime/internal/heaptest"
)

var keep [][]byte

// LiveHeap counts what is kept and not what was dropped.
func TestLiveHeapCountsWhatIsKept(t *testing.T) {
	before := heaptest.LiveHeap()
	for range 64 {
		keep = append(keep, make([]byte, 16<<10))
		_ = make([]byte, 16<<10) // dropped at once
	}
	grew := heaptest.LiveHeap() - before
	keep = nil
	if grew < 64*16<<10 || grew > 2*64*16<<10 {
		t.Fatalf("the live heap grew %d B for 1 MiB kept and 1 MiB dropped", grew)
	}
}

// Goroutines started after WarmGoroutines(n), up to n of them, take the
// records it left: their records are not counted in the heap.
func TestWarmGoroutinesLeavesRecords(t *testing.T) {
	const n = 1000
	heaptest.WarmGoroutines(n)
	before := heaptest.LiveHeap()
	hold := make(chan struct{})
	done := make(chan struct{}, n)
	for range n {
		go func() { <-hold; done <- struct{}{} }()
	}
	per := float64(int64(heaptest.LiveHeap())-int64(before)) / n
	close(hold)
	for range n {
		<-done
	}
	// A goroutine's record is about 400 B; a reused one costs nothing.
	if per > 200 {
		t.Fatalf("%.0f B of heap per goroutine started after the warm-up, want their records reused", per)
	}
}
