// Package golden compares test output with files under testdata, and
// rewrites them when the tests run with -update.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update is registered once for every test binary that uses the package.
var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Bytes compares got with testdata/name, or writes it there with -update.
func Bytes(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run with -update if the change is intended):\n%s", name, got)
	}
}

// JSON is Bytes for v marshalled with two-space indentation.
func JSON(t testing.TB, name string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	Bytes(t, name, append(got, '\n'))
}

// IndentedJSON is Bytes for raw JSON indented with two spaces.
func IndentedJSON(t testing.TB, name string, raw []byte) {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	b.WriteByte('\n')
	Bytes(t, name, b.Bytes())
}
