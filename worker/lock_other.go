//go:build !unix

package worker

// lockDataDir does nothing where flock is missing: two embedded workers
// must not be given one --data-dir there.
func lockDataDir(string) (func(), error) { return func() {}, nil }
