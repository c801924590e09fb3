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
// use (internal/engine ran on about one core). Measured one per core
// against four (six for internal/engine), at a load of 5 to 13: gateway's
// tests 12.5 s and 8.8 s, mcp's 27.5 s and 22 s, internal/engine's 54 s
// and 37 s.
func WaitingParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(4*runtime.GOMAXPROCS(0)))
	}
}
