//go:build !race

package turn_test

const raceEnabled = false
