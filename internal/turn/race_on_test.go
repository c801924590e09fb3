//go:build race

package turn_test

// raceEnabled: the race detector's build drops a quarter of what a
// sync.Pool is given back, so that a step's reused state is sometimes
// made again.
const raceEnabled = true
