package natstest

import (
	"flag"
	"runtime"
	"strconv"
)

// WaitingParallel makes the test binary run up to four parallel tests
// per core, unless -test.parallel was given (its default is one per
// core). Call it from TestMain before m.Run, in a package whose parallel
// tests mostly wait on servers, leases, timers and processes: with one
// per core, `go test ./...` on two cores runs two of them at a time,
// each waiting on a core that the other package running beside it could
// use: such a package keeps about one core busy. Four per core let the
// waits overlap, which shortens those packages' tests on a loaded
// machine.
func WaitingParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
}
