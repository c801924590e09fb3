package computer

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/tools"
)

// Head and tail are cut on character boundaries, the note counts what is
// left out, and nothing is lost when the output fits.
func TestCapture(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		head      int
		want      string
		truncated bool
	}{
		{"fits", []string{"ab", "cd", "ef"}, 4, "abcdef", false},
		{"exactly full", []string{"abcdefgh"}, 4, "abcdefgh", false},
		{"cut", []string{"abcd", "XXXX", "efgh"}, 4, "abcd\n[… 4 bytes elided; the full text is in log (read it in ranges with read_file) …]\nefgh", true},
		{"cut inside characters", []string{"aé", "XXXX", "éb"}, 2, "a\n[… 8 bytes elided; the full text is in log (read it in ranges with read_file) …]\nb", true},
		{"one large write", []string{strings.Repeat("x", 100) + "tail"}, 4, "xxxx\n[… 96 bytes elided; the full text is in log (read it in ranges with read_file) …]\ntail", true},
	}
	for _, tt := range tests {
		c := &capture{headMax: tt.head, tailMax: tt.head}
		for _, w := range tt.writes {
			if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		got, truncated := c.text("log")
		if got != tt.want || truncated != tt.truncated || !utf8.ValidString(got) {
			t.Errorf("%s: %q, %v; want %q, %v", tt.name, got, truncated, tt.want, tt.truncated)
		}
	}
}

func TestClip(t *testing.T) {
	s := strings.Repeat("日本語", 2000)
	got, cut := clip(s, 2048, "")
	if !cut || len(got) > 2048 || !utf8.ValidString(got) || !strings.HasPrefix(got, "日本語") || !strings.HasSuffix(got, "日本語") {
		t.Errorf("clip: %d bytes, cut %v", len(got), cut)
	}
	if got, cut := clip("short", 2048, ""); got != "short" || cut {
		t.Errorf("clip short: %q %v", got, cut)
	}
}

// The log keeps up to its limit, then counts without failing the writer.
func TestCaptureLogLimit(t *testing.T) {
	var log strings.Builder
	c := &capture{headMax: 2, tailMax: 2, log: &log, logMax: 5}
	for _, w := range []string{"abc", "def", "ghi"} {
		c.Write([]byte(w))
	}
	if log.String() != "abcde" || !c.logCut || c.logged != 5 || c.total != 9 {
		t.Errorf("log %q cut %v logged %d total %d", log.String(), c.logCut, c.logged, c.total)
	}
}

// BenchmarkCaptureWrite is the cost of one 4 KiB write of a command's
// output, without and with a progress listener (the label and the
// report per write).
func BenchmarkCaptureWrite(b *testing.B) {
	chunk := make([]byte, 4<<10)
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"nobody", context.Background()},
		{"listener", tools.WithProgress(context.Background(), func(int64, int64, string) {})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := &capture{headMax: 8 << 10, tailMax: 8 << 10, progress: outputProgress(bc.ctx)}
			b.ReportAllocs()
			b.SetBytes(int64(len(chunk)))
			for b.Loop() {
				_, _ = c.Write(chunk)
			}
		})
	}
}

// The label is made again exactly when byteCount would show another
// size.
func TestShownSize(t *testing.T) {
	for n := int64(0); n < 3<<20; n += 37 {
		a, b := n, n+37
		if (shownSize(a) == shownSize(b)) != (textclip.ByteCount(a) == textclip.ByteCount(b)) {
			t.Fatalf("%d (%s) and %d (%s): shownSize %d and %d", a, textclip.ByteCount(a), b, textclip.ByteCount(b), shownSize(a), shownSize(b))
		}
	}
}
