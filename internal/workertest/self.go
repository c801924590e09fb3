package workertest

import (
	"os"
	"path/filepath"
	"strings"
)

// IsProgram says whether this process is a program a test runs rather
// than the tests: a copy of the test binary under a name not ending in
// .test (CopySelf), run without the -test. flags the go command always
// passes. The environment cannot say it: tests run their programs with
// an environment of their own.
func IsProgram() bool {
	if strings.HasSuffix(filepath.Base(os.Args[0]), ".test") {
		return false
	}
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-test.") {
			return false
		}
	}
	return true
}

// CopySelf puts this test binary at path, where IsProgram makes it the
// program: a hard link, or a copy across file systems.
func CopySelf(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if os.Link(self, path) == nil {
		return nil
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o755)
}
