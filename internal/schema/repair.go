package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/kaptinlin/jsonrepair"
)

// Rung names, reported to the gateway in the order applied.
const (
	RungStripFences    = "strip_fences"    // rung 2
	RungCloseTruncated = "close_truncated" // rung 3
	RungJSONRepair     = "json_repair"     // rung 4
)

// DefaultRepairLimit is the size above which nothing is repaired (1 MiB).
const DefaultRepairLimit = 1 << 20

// RepairOptions tunes the ladder; the zero value works.
type RepairOptions struct {
	// Limit is the size cap in bytes above which no rung beyond "as sent"
	// is tried; 0 (or a negative value) means DefaultRepairLimit.
	Limit int
	// Conservative forbids the rungs that invent or drop content
	// (close_truncated and json_repair). Destructive tools use it: a
	// truncated `rm` command must not run.
	Conservative bool
}

// Sentinel errors, matched with errors.Is. The error returned by Repair
// wraps one of them and says, in English a model can act on, what was
// wrong with the arguments.
var (
	ErrArgumentsTooLarge = errors.New("arguments exceed the repair size limit")
	ErrUnparseable       = errors.New("arguments are not valid JSON")
)

const (
	// maxNesting mirrors encoding/json's own nesting limit: json.Valid
	// rejects anything deeper, so no rung can succeed beyond it and the
	// recursive jsonrepair library is not worth risking on such input.
	maxNesting = 10000

	// jsonRepairBudget bounds the work handed to the jsonrepair library,
	// which rebuilds its whole output buffer at many repair sites (every
	// object member, every missing comma, every stray quote) and is
	// therefore quadratic. The cost estimate is (bytes outside
	// double-quoted strings) × (total bytes): a large object whose bulk is
	// string content is cheap, a large soup of tokens is not. 1<<27 keeps
	// the worst cases measured at well under 100ms.
	jsonRepairBudget = 1 << 27
)

// Repair returns valid JSON text for args, and the rungs that made it parse
// (nil when it parsed as sent).
//
// The ladder is ordered and cumulative: each rung runs on the previous
// rung's output, only when that output does not parse, and is reported only
// if it changed the text. A rung that changed nothing is skipped silently.
//
//  1. as sent: valid JSON (surrounding whitespace trimmed) is returned
//     unchanged; empty or blank arguments mean {}.
//  2. strip_fences: keep the one JSON object inside Markdown fences or
//     surrounding prose.
//  3. close_truncated: finish a document that was cut off (close strings,
//     complete literals and numbers, drop an incomplete member, close
//     containers) and balance mismatched or stray closing brackets.
//  4. json_repair: the general-purpose jsonrepair library (comments,
//     single quotes, trailing commas, unquoted keys, Python literals...),
//     accepted only when it yields an object or array, and skipped for
//     input too large for its quadratic repairs (see jsonRepairBudget).
//
// Rungs 3 and 4 make up or discard content, so opt.Conservative disables
// them. Arguments longer than the limit are only checked as sent.
func Repair(args string, opt RepairOptions) ([]byte, []string, error) {
	text := trimJSONSpace(args)
	if text == "" {
		return []byte("{}"), nil, nil
	}
	if b := []byte(text); json.Valid(b) {
		return b, nil, nil
	}

	limit := opt.Limit
	if limit <= 0 {
		limit = DefaultRepairLimit
	}
	if len(args) > limit {
		return nil, nil, fmt.Errorf("%w (%d bytes, limit %d), so it was not repaired: %s",
			ErrArgumentsTooLarge, len(args), limit, syntaxDetail(args))
	}

	cur := text
	var rungs []string
	// apply moves the ladder one rung up and reports whether the text now
	// parses. An unchanged text is known not to parse, so it is neither
	// reported nor re-validated.
	apply := func(rung, next string) bool {
		if next == cur {
			return false
		}
		cur = next
		rungs = append(rungs, rung)
		return json.Valid([]byte(cur))
	}

	if apply(RungStripFences, stripFences(cur)) {
		return []byte(cur), rungs, nil
	}
	if opt.Conservative {
		return nil, nil, fmt.Errorf("%w: %s; this tool does not accept repaired arguments, resend the complete JSON object",
			ErrUnparseable, syntaxDetail(args))
	}
	if apply(RungCloseTruncated, closeTruncated(cur)) {
		return []byte(cur), rungs, nil
	}
	if apply(RungJSONRepair, libraryRepair(cur)) {
		return []byte(cur), rungs, nil
	}
	return nil, nil, fmt.Errorf("%w: %s", ErrUnparseable, syntaxDetail(args))
}

// syntaxDetail describes why encoding/json rejects s, with the byte offset
// and a short excerpt, so that a model can locate and fix its mistake. The
// offset refers to the arguments exactly as sent, not to a repaired text.
func syntaxDetail(s string) string {
	var v json.RawMessage
	// Unmarshal validates the whole input before decoding anything, so an
	// invalid document costs one scan up to the error.
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		if err == nil {
			return "no syntax error found"
		}
		return err.Error()
	}
	off := int(se.Offset)
	lo, hi := max(off-20, 0), min(off+10, len(s))
	return fmt.Sprintf("%s at byte offset %d (near %q)", se.Error(), se.Offset, s[lo:hi])
}

// trimJSONSpace trims the four whitespace bytes JSON allows. Other Unicode
// spaces are left alone: removing them would be a silent repair.
func trimJSONSpace(s string) string {
	return strings.Trim(s, " \t\r\n")
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// ---------------------------------------------------------------------------
// Rung 2: strip_fences

// stripFences returns the single JSON object embedded in s: from its first
// '{' to the matching '}', or, when the object never closes, to the end of
// the text or of its Markdown fence, whichever comes first (rung 3 closes
// it). Text without a '{' is returned unchanged.
//
// Closing brackets after the object are kept: they are an imbalance for
// rung 3 to fix, not prose, and cutting them here would hide that.
func stripFences(s string) string {
	first := strings.IndexByte(s, '{')
	if first < 0 {
		return s
	}
	obj := extractObject(s, first)
	// Prose before a fenced block may itself contain braces ("call {tool}
	// with:\n```json\n{...}"). When the object at the first brace is not
	// JSON and a fence opens after that brace, the object inside the fence
	// is the better candidate, provided it parses. Both scans are linear.
	if f := fenceIndex(s, first); f >= 0 {
		if j := strings.IndexByte(s[f:], '{'); j >= 0 && !json.Valid([]byte(obj)) {
			if alt := extractObject(s, f+j); json.Valid([]byte(alt)) {
				return alt
			}
		}
	}
	return obj
}

// extractObject scans s from the '{' at start to its matching '}',
// string-aware, and returns that span (plus any trailing run of closing
// brackets). A Markdown fence ends the span early: backticks cannot occur
// in JSON outside strings, and a fence at the start of a line cannot occur
// inside a JSON string because raw newlines are not allowed there.
func extractObject(s string, start int) string {
	depth := 0
	inStr, esc := false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if c == '\n' && fenceAt(s, i+1) {
			return trimJSONSpace(s[start:i])
		}
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				end := i + 1
				if onlyClosers(s[end:]) {
					end = len(s)
				}
				return trimJSONSpace(s[start:end])
			}
		case '`':
			if strings.HasPrefix(s[i:], "```") {
				return trimJSONSpace(s[start:i])
			}
		}
	}
	return trimJSONSpace(s[start:])
}

// fenceAt reports whether a Markdown fence starts at s[i], allowing the
// indentation Markdown allows.
func fenceAt(s string, i int) bool {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return strings.HasPrefix(s[i:], "```")
}

// fenceIndex returns the index of the first line-start fence at or after
// from, or -1.
func fenceIndex(s string, from int) int {
	for i := from; i < len(s); i++ {
		if s[i] == '\n' && fenceAt(s, i+1) {
			return i + 1
		}
	}
	return -1
}

func onlyClosers(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '}' && c != ']' && !isJSONSpace(c) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------
// Rung 3: close_truncated

// closeTruncated finishes a JSON document that was cut off, and balances
// its brackets. It is a single-pass JSON recognizer with a bracket stack, so
// it is string-aware and linear, and it only touches text that is a prefix
// of JSON up to bracket mistakes: on any other syntax error (single quotes,
// comments, trailing commas...) it returns s unchanged and leaves the text
// to rung 4, rather than guessing and making it worse.
//
// Repairs, in the order they can occur:
//   - a closer that matches no open container is dropped ({"a":1}} → {"a":1});
//   - a closer that matches an outer container first closes the inner ones
//     ({"a":[1} → {"a":[1]});
//   - at the end: an unterminated string is closed (a dangling escape, a
//     partial \u escape, a lone high surrogate or a partial UTF-8 sequence
//     is dropped first); a literal is completed (tr → true); a number is cut
//     back to its last valid prefix (1.5e → 1.5); a member without a value
//     is dropped together with its key and comma ({"a":1,"b": → {"a":1});
//     a dangling comma is dropped; then open containers are closed
//     innermost first.
func closeTruncated(s string) string {
	c := truncCloser{out: make([]byte, 0, len(s)+16)}
	for i := 0; i < len(s); i++ {
		if c.st == tsString {
			// Copy ordinary string content in bulk; only quotes, escapes
			// and control characters need the state machine.
			j := i
			for j < len(s) && s[j] != '"' && s[j] != '\\' && s[j] >= 0x20 {
				j++
			}
			c.out = append(c.out, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		if !c.feed(s[i]) {
			return s
		}
	}
	if !c.finish() {
		return s
	}
	return string(c.out)
}

// truncState is where the recognizer is in the JSON grammar.
type truncState uint8

const (
	tsValue        truncState = iota // a value must follow: document start, after ':', after ',' in an array
	tsValueOrClose                   // just after '[': a value or ']'
	tsKeyOrClose                     // just after '{': a key or '}'
	tsKey                            // after ',' in an object: a key
	tsColon                          // after a key: ':'
	tsComma                          // after a member: ',' or the container's closer
	tsDone                           // the top-level value is complete
	tsString                         // inside a string (key or value, see truncCloser.key)
	tsEscape                         // after a backslash inside a string
	tsUnicode                        // inside the hex digits of a \u escape
	tsNumber                         // inside a number (see numState)
	tsLiteral                        // inside true, false or null
)

// numState follows the JSON number grammar, so that a truncated number can
// be cut back to its longest valid prefix.
type numState uint8

const (
	numSign     numState = iota // after '-'
	numZero                     // after a leading '0'
	numInt                      // in integer digits
	numDot                      // after '.'
	numFrac                     // in fraction digits
	numExp                      // after 'e' or 'E'
	numExpSign                  // after the exponent's sign
	numExpDigit                 // in exponent digits
)

// complete reports whether a number may end in state n.
func (n numState) complete() bool {
	return n == numZero || n == numInt || n == numFrac || n == numExpDigit
}

// next returns the number state after byte b, or false if b cannot
// continue the number.
func (n numState) next(b byte) (numState, bool) {
	digit := b >= '0' && b <= '9'
	switch n {
	case numSign:
		if b == '0' {
			return numZero, true
		}
		if digit {
			return numInt, true
		}
	case numZero, numInt, numFrac:
		switch {
		case digit && n != numZero:
			return n, true
		case b == '.' && n != numFrac:
			return numDot, true
		case b == 'e' || b == 'E':
			return numExp, true
		}
	case numDot:
		if digit {
			return numFrac, true
		}
	case numExp:
		if b == '+' || b == '-' {
			return numExpSign, true
		}
		if digit {
			return numExpDigit, true
		}
	case numExpSign, numExpDigit:
		if digit {
			return numExpDigit, true
		}
	}
	return n, false
}

// frame is one open container.
type frame struct {
	open byte // '{' or '['
	// cut is the output length to truncate to when the member being read
	// turns out to be incomplete: just after the opener, or just before
	// the comma that introduced the member.
	cut int
}

type truncCloser struct {
	out   []byte
	stack []frame
	// open counts the frames per opener ('{' and '['), so that a
	// mismatched closer can be classified in O(1) rather than by
	// searching the stack.
	nObj, nArr int

	st  truncState
	key bool // the current string is an object key

	num     numState
	numGood int // output length at the number's last complete state, or -1

	lit  string // the literal being matched
	litN int    // bytes of lit matched so far

	strStart int // output offset just after the current string's opening quote
	escStart int // output offset of the backslash of the \u escape being read
	hexLeft  int
	uval     rune
	lastU    rune // value of the last complete \u escape in the current string
	lastUEnd int  // output offset just after it, or -1
}

// feed consumes one byte and reports whether the text is still a prefix of
// JSON (modulo the bracket repairs).
func (c *truncCloser) feed(b byte) bool {
	switch c.st {
	case tsString:
		switch {
		case b == '"':
			c.out = append(c.out, b)
			if c.key {
				c.st = tsColon
			} else {
				c.valueDone()
			}
		case b == '\\':
			c.out = append(c.out, b)
			c.st = tsEscape
		case b < 0x20:
			return false
		default:
			c.out = append(c.out, b)
		}
		return true
	case tsEscape:
		switch b {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			c.st = tsString
		case 'u':
			c.st, c.hexLeft, c.uval = tsUnicode, 4, 0
			c.escStart = len(c.out) - 1
		default:
			return false
		}
		c.out = append(c.out, b)
		return true
	case tsUnicode:
		v, ok := hexValue(b)
		if !ok {
			return false
		}
		c.out = append(c.out, b)
		c.uval = c.uval<<4 | v
		if c.hexLeft--; c.hexLeft == 0 {
			c.st, c.lastU, c.lastUEnd = tsString, c.uval, len(c.out)
		}
		return true
	case tsNumber:
		if n, ok := c.num.next(b); ok {
			c.num = n
			c.out = append(c.out, b)
			if n.complete() {
				c.numGood = len(c.out)
			}
			return true
		}
		if !c.num.complete() {
			return false // "1.}" is malformed, not truncated
		}
		// b belongs to whatever follows the number.
		c.valueDone()
	case tsLiteral:
		if b != c.lit[c.litN] {
			return false
		}
		c.out = append(c.out, b)
		if c.litN++; c.litN == len(c.lit) {
			c.valueDone()
		}
		return true
	}

	// Between tokens.
	switch b {
	case ' ', '\t', '\n', '\r':
		c.out = append(c.out, b)
		return true
	case '}', ']':
		return c.closeWith(b)
	}
	switch c.st {
	case tsValue, tsValueOrClose:
		return c.startValue(b)
	case tsKeyOrClose, tsKey:
		if b != '"' {
			return false
		}
		c.startString(true)
		return true
	case tsColon:
		if b != ':' {
			return false
		}
		c.out = append(c.out, b)
		c.st = tsValue
		return true
	case tsComma:
		if b != ',' {
			return false
		}
		top := &c.stack[len(c.stack)-1]
		top.cut = len(c.out)
		c.out = append(c.out, b)
		if top.open == '{' {
			c.st = tsKey
		} else {
			c.st = tsValue
		}
		return true
	}
	return false // tsDone: only whitespace and stray closers may follow
}

// startValue begins the value whose first byte is b.
func (c *truncCloser) startValue(b byte) bool {
	switch {
	case b == '{' || b == '[':
		if len(c.stack) == maxNesting {
			return false // json.Valid would reject the result anyway
		}
		c.out = append(c.out, b)
		c.stack = append(c.stack, frame{open: b, cut: len(c.out)})
		if b == '{' {
			c.nObj++
			c.st = tsKeyOrClose
		} else {
			c.nArr++
			c.st = tsValueOrClose
		}
		return true
	case b == '"':
		c.startString(false)
		return true
	case b == '-' || (b >= '0' && b <= '9'):
		c.out = append(c.out, b)
		c.st, c.numGood = tsNumber, -1
		switch b {
		case '-':
			c.num = numSign
		case '0':
			c.num = numZero
		default:
			c.num = numInt
		}
		if c.num.complete() {
			c.numGood = len(c.out)
		}
		return true
	case b == 't' || b == 'f' || b == 'n':
		c.out = append(c.out, b)
		c.st, c.litN = tsLiteral, 1
		switch b {
		case 't':
			c.lit = "true"
		case 'f':
			c.lit = "false"
		default:
			c.lit = "null"
		}
		return true
	}
	return false
}

func (c *truncCloser) startString(key bool) {
	c.out = append(c.out, '"')
	c.st, c.key = tsString, key
	c.strStart, c.lastUEnd = len(c.out), -1
}

// valueDone moves on after a complete value.
func (c *truncCloser) valueDone() {
	if len(c.stack) == 0 {
		c.st = tsDone
	} else {
		c.st = tsComma
	}
}

// closeWith handles the closer b between tokens.
func (c *truncCloser) closeWith(b byte) bool {
	open := c.nObj
	if b == ']' {
		open = c.nArr
	}
	if open == 0 {
		// Nothing it could close: a stray closer, dropped.
		return true
	}
	// b closes an open container, possibly an outer one: close the inner
	// ones first, as the author evidently forgot them. A closer right after
	// ',' or ':' is a different mistake (trailing comma, missing value)
	// that this rung does not guess at.
	for {
		if c.st != tsComma && c.st != tsKeyOrClose && c.st != tsValueOrClose {
			return false
		}
		if c.pop() == b {
			return true
		}
	}
}

// pop closes the innermost container and returns the closer it wrote.
func (c *truncCloser) pop() byte {
	top := c.stack[len(c.stack)-1]
	c.stack = c.stack[:len(c.stack)-1]
	closer := byte(']')
	if top.open == '{' {
		closer = '}'
		c.nObj--
	} else {
		c.nArr--
	}
	c.out = append(c.out, closer)
	c.valueDone()
	return closer
}

// dropMember discards the incomplete member of the innermost container,
// with the comma before it. It fails at top level, where there is no
// container to keep.
func (c *truncCloser) dropMember() bool {
	if len(c.stack) == 0 {
		return false
	}
	c.out = c.out[:c.stack[len(c.stack)-1].cut]
	c.st = tsComma
	return true
}

// closeString terminates a string cut off in the middle, dropping a
// partial trailing escape or character rather than inventing its rest.
func (c *truncCloser) closeString() {
	switch c.st {
	case tsEscape:
		c.out = c.out[:len(c.out)-1]
	case tsUnicode:
		c.out = c.out[:c.escStart]
	}
	// A high surrogate whose low half was cut off would decode as U+FFFD.
	if c.lastUEnd == len(c.out) && c.lastU >= 0xD800 && c.lastU < 0xDC00 {
		c.out = c.out[:len(c.out)-len(`\uXXXX`)]
	}
	// Likewise a multi-byte UTF-8 sequence cut in the middle.
	for k := 1; k <= utf8.UTFMax && len(c.out)-k >= c.strStart; k++ {
		if tail := c.out[len(c.out)-k:]; utf8.RuneStart(tail[0]) {
			if !utf8.FullRune(tail) {
				c.out = c.out[:len(c.out)-k]
			}
			break
		}
	}
	c.out = append(c.out, '"')
}

// finish completes whatever the input was cut off in, then closes every
// open container. It reports false when there is nothing sensible to
// produce (e.g. a lone "-" or only stray closers).
func (c *truncCloser) finish() bool {
	switch c.st {
	case tsString, tsEscape, tsUnicode:
		if c.key {
			// A key without its value is no member at all.
			if !c.dropMember() {
				return false
			}
		} else {
			c.closeString()
			c.valueDone()
		}
	case tsNumber:
		switch {
		case c.num.complete():
			c.valueDone()
		case c.numGood >= 0:
			c.out = c.out[:c.numGood]
			c.valueDone()
		default:
			if !c.dropMember() {
				return false
			}
		}
	case tsLiteral:
		c.out = append(c.out, c.lit[c.litN:]...)
		c.valueDone()
	case tsColon, tsValue, tsKey:
		// A key without ':', a ':' or ',' without what follows: drop the
		// member (for a dangling ',' that is just the comma).
		if !c.dropMember() {
			return false
		}
	}
	for len(c.stack) > 0 {
		c.pop()
	}
	return c.st == tsDone
}

func hexValue(b byte) (rune, bool) {
	switch {
	case b >= '0' && b <= '9':
		return rune(b - '0'), true
	case b >= 'a' && b <= 'f':
		return rune(b-'a') + 10, true
	case b >= 'A' && b <= 'F':
		return rune(b-'A') + 10, true
	}
	return 0, false
}

// ---------------------------------------------------------------------------
// Rung 4: json_repair

// libraryRepair runs the jsonrepair library on s and returns its output, or
// s unchanged when the library fails, panics, or is not worth the risk:
// input nested beyond what json.Valid accepts (the library recurses), or
// large enough for the library's quadratic repairs to take too long.
//
// Only an object or array counts as a repair. The library turns any prose
// into a JSON string ("I cannot do that" → "\"I cannot do that\"") and a
// lone "-" into -0; accepting those would trade a precise syntax error for
// a confusing schema error later.
func libraryRepair(s string) (out string) {
	if !repairAffordable(s) {
		return s
	}
	defer func() {
		if recover() != nil {
			out = s // third-party bugs must not take the runtime down
		}
	}()
	r, err := jsonrepair.Repair(s)
	if err != nil {
		return s
	}
	r = trimJSONSpace(r)
	if r == "" || (r[0] != '{' && r[0] != '[') {
		return s
	}
	return r
}

// repairAffordable estimates, in one pass, whether jsonrepair can handle s
// quickly and safely; see jsonRepairBudget and maxNesting. Strings are
// recognized by double quotes only, which is enough for an estimate.
func repairAffordable(s string) bool {
	depth, outside := 0, 0
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
				outside++
			}
			continue
		}
		if isJSONSpace(c) {
			continue
		}
		outside++
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > maxNesting {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return len(s) == 0 || outside <= jsonRepairBudget/len(s)
}
