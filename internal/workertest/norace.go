//go:build !race

package workertest

// raceBuild: this binary was built with -race.
const raceBuild = false
