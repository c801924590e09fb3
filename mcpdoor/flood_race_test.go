//go:build race

package mcpdoor_test

// raceOn: the race detector slows every goroutine several times, the
// flood's and the timed principal's alike, but not evenly.
const raceOn = true
