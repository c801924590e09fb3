package web

import (
	"strings"
	"unicode/utf8"
)

// noteReserve is the part of a budget kept for the notes around a cut.
const noteReserve = 400

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
