package worker

import (
	"context"
	"os"
	"regexp"
)

// DefaultVersion is the version a worker reports when Options.Version is
// empty.
const DefaultVersion = "0.0.0-dev"

// Options configure [Main]. The zero value is cmd/worker with the version
// DefaultVersion.
type Options struct {
	// Version is the program's version (SemVer; a leading "v", as in Go
	// module versions, is dropped), reported in the worker's micro service
	// info, its telemetry and its MCP client; empty is DefaultVersion.
	Version string
	// Categories are the tool categories in catalog order; nil is
	// DefaultCategories().
	Categories []Category
	// Args are the command-line arguments without the program's name; nil
	// is os.Args[1:].
	Args []string
}

// Main runs the worker program until a signal (or the end of ctx) stops
// it, then exits the process: with 0 after a clean stop or --help, 2 when
// the flags or the environment are wrong (one line saying what, on
// stderr), 1 when the worker failed. When the process is PID 1 (a
// container's only process), Main first becomes its init: it runs the
// program as its child, forwards signals and reaps orphans.
func Main(ctx context.Context, o Options) {
	os.Exit(run(ctx, o))
}

// semVer is what the NATS micro service takes as a version (semver.org's
// regular expression).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)
