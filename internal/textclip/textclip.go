package textclip

import (
	"fmt"
	"unicode/utf8"
)

// Head is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence.
func Head(s string, n int) string {
	if n >= len(s) {
		return s
	}
	n = max(n, 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Tail is the longest suffix of s of at most n bytes that does not start
// inside a UTF-8 sequence.
func Tail(s string, n int) string {
	if n >= len(s) {
		return s
	}
	i := len(s) - max(n, 0)
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}

// Cut is s when it is at most n bytes, else its longest head that leaves
// room for mark within n bytes (Head), then mark: a cut marked as one,
// within its budget.
func Cut(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	return Head(s, n-len(mark)) + mark
}

// Ellipsis is s when it is at most n bytes, else its first n bytes
// (Head) then "…": a quote that keeps n bytes of what it quotes.
func Ellipsis(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Head(s, n) + "…"
}

// Runes is s when it has at most n characters, else its first n-1 then
// "…" (n characters in all; n must be at least 1): for titles and labels
// that a person reads on one line, where characters count, not bytes.
// An invalid byte counts as one character and is written as U+FFFD.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// ByteCount writes a size for people: "812 bytes", "16.0 KiB", "47.7 MiB".
func ByteCount(n int64) string {
	const unit = 1024
	if n < unit {
		if n == 1 {
			return "1 byte"
		}
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
