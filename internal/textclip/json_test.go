package textclip_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
)

// encoded is the length of s inside a JSON string.
func encoded(s string) int {
	b, _ := json.Marshal(s)
	return len(b) - 2
}

func TestText(t *testing.T) {
	cases := []struct {
		name string
		s    string
		n    int
	}{
		{"short", "hello", 100},
		{"ascii", strings.Repeat("a", 10000), 1000},
		{"escapes", strings.Repeat("<\n\"&\x01", 5000), 1000},
		{"multibyte", strings.Repeat("日本語", 5000), 999},
		{"invalid utf-8", strings.Repeat("\xff\xfe", 5000), 500},
		{"separators", strings.Repeat("\u2028x", 5000), 700},
		{"tiny budget", strings.Repeat("a", 10000), 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := textclip.Text(c.s, c.n)
			if encoded(c.s) <= c.n {
				if got != c.s {
					t.Fatalf("text that fits was changed")
				}
				return
			}
			if !strings.Contains(got, "bytes left out") {
				t.Fatalf("no note: %q", got)
			}
			if c.n >= 64 && encoded(got) > c.n {
				t.Errorf("encoded %d bytes, over %d", encoded(got), c.n)
			}
			if utf8.ValidString(c.s) && !utf8.ValidString(got) {
				t.Errorf("a character was cut")
			}
		})
	}
	got := textclip.Text("HEAD"+strings.Repeat("x", 10000)+"TAIL", 200)
	if !strings.HasPrefix(got, "HEAD") || !strings.HasSuffix(got, "TAIL") {
		t.Errorf("head or tail lost: %q", got)
	}
}

func TestList(t *testing.T) {
	list := make([]string, 1000)
	for i := range list {
		list[i] = fmt.Sprint("note ", i, strings.Repeat("!", i))
	}
	got := textclip.List(list, 10, 50)
	if len(got) != 11 || got[10] != "and 990 more" {
		t.Fatalf("got %d items, last %q", len(got), got[len(got)-1])
	}
	for _, s := range got {
		if encoded(s) > 50 {
			t.Errorf("item of %d bytes", encoded(s))
		}
	}
	short := []string{"a", "b"}
	if got := textclip.List(short, 10, 50); len(got) != 2 {
		t.Errorf("short list changed: %v", got)
	}
}

func FuzzText(f *testing.F) {
	f.Add("hello world", 5)
	f.Add(strings.Repeat("<&>\n", 100), 80)
	f.Add("\xff\u2028日本", 40)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if got := textclip.JSONLen(s); got != encoded(s) {
			t.Fatalf("JSONLen(%q) = %d, json.Marshal writes %d", s, got, encoded(s))
		}
		if n < 0 || n > 1<<16 {
			return
		}
		got := textclip.Text(s, n)
		if encoded(s) <= n {
			if got != s {
				t.Fatalf("text that fits was changed")
			}
			return
		}
		if n >= 64 && encoded(got) > n {
			t.Fatalf("Text(%q, %d) encodes to %d bytes", s, n, encoded(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("a character was cut: %q", got)
		}
	})
}

// TestJSONLenEveryASCIIByte holds JSONLen's table to encoding/json, byte
// by byte.
func TestJSONLenEveryASCIIByte(t *testing.T) {
	for c := range utf8.RuneSelf {
		s := "a" + string(rune(c)) + "b"
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := textclip.JSONLen(s), len(b)-2; got != want {
			t.Errorf("byte %#x: JSONLen %d, encoding/json %d", c, got, want)
		}
	}
}
