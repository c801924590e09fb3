package mcpdoor

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkPacerReserve is the pacer's cost per request within the rate,
// over 64 keys from every core.
func BenchmarkPacerReserve(b *testing.B) {
	p := newPacer(1e9)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "principal:" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if d, ok, _ := p.reserve(keys[i%len(keys)], 1, time.Now()); !ok || d != 0 {
				b.Fatal("held within the rate")
			}
			i++
		}
	})
}
