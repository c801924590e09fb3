package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The load program against an embedded server and an in-process worker:
// every step it publishes gets its step.done, and every call succeeds.
func TestLoadRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	o := options{steps: 300, concurrency: 32, calls: 2, workers: 1, storage: "file", dataDir: t.TempDir(), out: &out}
	if err := run(ctx, o); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"steps=300 calls/step=2", "call errors=0", "throughput="} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
