package textclip

import (
	"strconv"
	"unicode/utf8"
)

// MaxReasonBytes bounds a reason quoted into events: a cancel's, a
// decision's (Reason). A reason is quoted into every output of a turn,
// so the size arithmetic of those events counts on this bound.
const MaxReasonBytes = 1 << 10

// leftOut is the note put where text was left out. It is plain ASCII but
// for the ellipsis, so its encoded length is its length.
func leftOut(n int) string { return "[… " + strconv.Itoa(n) + " bytes left out …]" }

// LeftOutLen is the length of the note Text puts in place of n bytes.
func LeftOutLen(n int) int { return len(leftOut(n)) }

// Text shortens s, when its JSON encoding is longer than n bytes, to its
// head and tail around a note saying how many bytes were left out; the
// encoding of the result is at most n bytes (the note alone when n
// leaves no room for text). Cuts fall on character boundaries. The
// lengths are those of the text inside a JSON string (JSONLen): every
// text this clips travels in one.
func Text(s string, n int) string {
	if JSONLen(s) <= n {
		return s
	}
	note := leftOut(len(s))
	room := n - len(note) - 4 // the newlines around the note, escaped
	if room <= 0 {
		return note
	}
	headRoom := room * 2 / 3
	head := prefixWithin(s, headRoom)
	tail := suffixWithin(s[head:], room-JSONLen(s[:head]))
	return s[:head] + "\n" + leftOut(len(s)-head-tail) + "\n" + s[len(s)-tail:]
}

// Reason bounds a reason quoted into outputs (a cancel's, a decision's)
// to MaxReasonBytes (Text).
func Reason(s string) string { return Text(s, MaxReasonBytes) }

// JSONLen is the length of s inside a JSON string, without its quotes,
// as encoding/json writes it: HTML's <, > and &, U+2028 and U+2029 and
// control characters escaped, each invalid byte written as \ufffd.
func JSONLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n += int(asciiExtra[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 5 // \ufffd for one byte
		case r == '\u2028' || r == '\u2029':
			n += 6 - size
		}
		i += size
	}
	return n
}

// asciiExtra is, for each ASCII byte, how many bytes its JSON encoding
// takes beyond the byte itself: \" \\ \n \r \t \b \f one, the other
// control characters and HTML's < > & five (\u00XX), the rest none. A
// lookup, where a chain of comparisons per byte was a visible part of
// building a short output item.
const asciiExtra = "" +
	"\x05\x05\x05\x05\x05\x05\x05\x05\x01\x01\x01\x05\x01\x01\x05\x05" + // 0x00-0x0f: \b \t \n \f \r
	"\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05" + // 0x10-0x1f
	"\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00" + // 0x20-0x2f: " &
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x05\x00" + // 0x30-0x3f: < >
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + // 0x40-0x4f
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00" + // 0x50-0x5f: \\
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + // 0x60-0x6f
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" // 0x70-0x7f

// runeJSONLen is the encoded length and the size in s of s's first
// character (or invalid byte).
func runeJSONLen(s string) (encoded, size int) {
	c := s[0]
	if c < utf8.RuneSelf {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			return 2, 1
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return 6, 1
		}
		return 1, 1
	}
	r, size := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
		return 6, size
	}
	return size, size
}

// prefixWithin is the length in bytes of the longest prefix of s whose
// encoding fits n bytes.
func prefixWithin(s string, n int) int {
	used, i := 0, 0
	for i < len(s) {
		w, size := runeJSONLen(s[i:])
		if used+w > n {
			break
		}
		used += w
		i += size
	}
	return i
}

// suffixWithin is the length in bytes of the longest suffix of s whose
// encoding fits n bytes.
func suffixWithin(s string, n int) int {
	used, j := 0, len(s)
	for j > 0 {
		_, size := utf8.DecodeLastRuneInString(s[:j])
		w, _ := runeJSONLen(s[j-size : j])
		if used+w > n {
			break
		}
		used += w
		j -= size
	}
	return len(s) - j
}
