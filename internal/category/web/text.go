package web

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// noteReserve is the part of a budget kept for the notes around a cut.
const noteReserve = 400

// headOf is the longest prefix of s of at most n bytes that does not end
// inside a UTF-8 sequence.
func headOf(s string, n int) string {
	if n >= len(s) {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// short cuts s to at most n runes, marking the cut.
func short(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// oneLine folds runs of white space, line breaks included, into spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// byteCount writes a size for people: "812 bytes", "16.0 KiB".
func byteCount(n int64) string {
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
