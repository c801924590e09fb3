package console

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzLocalPath checks that a redirect target localPath lets through
// stays on the console as a browser reads it: tabs and newlines
// dropped, a backslash read as a slash, resolved against the console's
// URL.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/approvals", "/\t/evil.example", "//evil.example", "/\\evil.example", "/a?b=//c", "https://x", "/%09/x", "/\u3000/x"} {
		f.Add(s)
	}
	base, _ := url.Parse("http://console.test/login")
	f.Fuzz(func(t *testing.T, next string) {
		if !localPath(next) {
			return
		}
		read := strings.NewReplacer("\t", "", "\n", "", "\r", "", "\\", "/").Replace(next)
		u, err := url.Parse(read)
		if err != nil {
			return // a browser would not follow it anywhere either
		}
		if got := base.ResolveReference(u); got.Host != base.Host || got.Scheme != base.Scheme {
			t.Fatalf("localPath(%q) let through a redirect a browser reads as %s", next, got)
		}
	})
}
