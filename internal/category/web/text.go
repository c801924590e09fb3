package web

import (
	"strings"
)

// noteReserve is the part of a budget kept for the notes around a cut.
const noteReserve = 400

// oneLine folds runs of white space, line breaks included, into spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
