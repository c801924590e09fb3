package schema

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
)

// MaxDepth is the deepest nesting of objects and arrays accepted in a
// call's arguments. The value is read again by every later reader inside
// a larger document: the approval record holds it a few levels down, the
// gateway decodes that record with encoding/json (which stops at 10,000)
// and may hand it on to readers that stop far earlier (Python's json
// module at about 1,000 with its default recursion limit). 512 leaves them
// all headroom; no tool's parameters come near it.
const MaxDepth = 512

// Bounds of the text of a refusal: a JSON pointer in it is clipped to
// MaxPointerBytes (its first and last segments kept), the whole sentence
// to MaxMessageBytes.
const (
	MaxPointerBytes = 200
	MaxMessageBytes = 1000
)

// tooDeep is the refusal of a value nested deeper than MaxDepth.
var tooDeep = fmt.Sprintf("the value nests objects and arrays more than %d levels deep, the most accepted (the arguments are parsed again inside larger records later); send a flatter value", MaxDepth)

func loneSurrogate(esc string) string {
	return "the escape " + esc + ` is a lone UTF-16 surrogate, which encodes no character (RFC 8259 leaves its meaning open, I-JSON forbids it); write the character itself, or both halves of a surrogate pair (\ud83d\ude80 is one character)`
}

func notUTF8(c byte) string {
	return fmt.Sprintf("byte 0x%02x in a string is not UTF-8; send the text as UTF-8 (bytes that are not text need an encoding such as base64)", c)
}

func incompleteEscape(esc string, digits int) string {
	return fmt.Sprintf(`the escape %s is incomplete: it takes %d hexadecimal digits; write all of them for the character, or \\ for a backslash`, esc, digits)
}

// charEscape returns r as a JSON escape: \u00e9, or a surrogate pair.
func charEscape(r rune) string {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return fmt.Sprintf(`\u%04x\u%04x`, hi, lo)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// readsAsChar is the refusal of an escape that JSON does not define but a
// common language reads as the character r: taking it as a backslash
// would run a different value than the one the model may mean.
func readsAsChar(esc string, r rune, langs string) string {
	ch := "the character itself"
	if r >= 0 && utf8.ValidRune(r) {
		ch = charEscape(r) + " for the character"
	}
	return fmt.Sprintf(`%s is a character in %s but not a JSON escape; write \%s for a backslash and %s, or %s`,
		esc, langs, esc, strconv.Quote(esc[1:]), ch)
}

// depthOver reports whether v nests objects and arrays deeper than limit.
func depthOver(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		if limit == 0 {
			return true
		}
		for _, e := range x {
			if depthOver(e, limit-1) {
				return true
			}
		}
	case []any:
		if limit == 0 {
			return true
		}
		for _, e := range x {
			if depthOver(e, limit-1) {
				return true
			}
		}
	}
	return false
}

// underflows reports whether a number literal is not zero but reads as
// zero in a float64 (1e-400): validated and run, it would be two values.
func underflows(lit string) bool {
	if f, err := strconv.ParseFloat(lit, 64); err != nil || f != 0 {
		return false
	}
	for i := 0; i < len(lit) && lit[i] != 'e' && lit[i] != 'E'; i++ {
		if lit[i] >= '1' && lit[i] <= '9' {
			return true
		}
	}
	return false
}

// tooSmall is the refusal of a number that underflows. A long literal
// is quoted by its first 20 and last 12 bytes (it is ASCII).
func tooSmall(lit string) string {
	if len(lit) > 40 {
		lit = textclip.Head(lit, 20) + "…" + textclip.Tail(lit, 12)
	}
	return "the number " + lit + " is not 0 but too small for a float64, which reads it as 0 (as most JSON readers do); send 0 if 0 is meant"
}
