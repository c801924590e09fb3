//go:build !race

package mcpdoor_test

const raceOn = false
