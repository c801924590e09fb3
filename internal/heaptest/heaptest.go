package heaptest

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// WarmGoroutines leaves n ended goroutines: a goroutine's record (the
// runtime's g) is never freed but reused, so that the next n goroutines
// started take records from these and are not counted in the heap, however
// many the tests before left.
func WarmGoroutines(n int) {
	var warm, up sync.WaitGroup
	hold := make(chan struct{})
	up.Add(n)
	for range n {
		warm.Go(func() {
			up.Done()
			<-hold
		})
	}
	up.Wait()
	close(hold)
	warm.Wait()
}

// LiveHeap is the live heap, in bytes, right after a collection.
func LiveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
