package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
)

// RungClass says whether a rung can change what the arguments mean.
type RungClass uint8

const (
	// Lossless rungs change syntax only: the value they yield is the one
	// reading of the text, every string and number in it exactly as the
	// model wrote it.
	Lossless RungClass = iota + 1
	// Guessing rungs would close a cut string, number, literal or
	// container, drop content, or invent a value. The ladder has none:
	// truncated arguments are refused on every tool (see Repair).
	Guessing
)

func (c RungClass) String() string {
	if c == Lossless {
		return "lossless"
	}
	return "guessing"
}

// Rung names, reported to the gateway in the order below.
const (
	RungStripFences    = "strip_fences"    // BOM, fences, prose, template tokens, tool-call tags around the object
	RungDoubleEncoded  = "double_encoded"  // "{\"a\":1}": a JSON string whose content is the object (or, inside it, a value the schema wants as an object or array)
	RungWrappingBraces = "wrapping_braces" // {{"a":1}}: one redundant pair of braces
	RungExtraCloser    = "extra_closer"    // {"a":1}}: stray closers after the complete object
	RungComments       = "comments"        // // and /* */ comments
	RungTrailingCommas = "trailing_commas" // {"a":[1,],}
	RungMissingCommas  = "missing_commas"  // {"a":1 "b":2}: members separated by white space only
	RungUnquotedKeys   = "unquoted_keys"   // {path: "x"}
	RungSingleQuotes   = "single_quotes"   // {'a': 'b'}, no apostrophe inside
	RungPythonLiterals = "python_literals" // True, False, None
	RungControlChars   = "control_chars"   // a raw newline or tab inside a string, escaped
	RungInvalidEscapes = "invalid_escapes" // \d kept as a backslash and a d
	RungUnicodeSpaces  = "unicode_spaces"  // a no-break or zero-width space between tokens
)

// Rung describes one rung of the ladder.
type Rung struct {
	Name  string
	Class RungClass
	bit   uint32 // in the set of rungs used: the tolerant reader's feature bits, then the ladder's own
}

// The ladder's own rungs, above the reader's feature bits.
const (
	usedStripFences   uint32 = 1 << 16
	usedDoubleEncoded uint32 = 1 << 17
)

// rungs is the ladder in reporting order.
var rungs = [...]Rung{
	{RungStripFences, Lossless, usedStripFences},
	{RungDoubleEncoded, Lossless, usedDoubleEncoded},
	{RungWrappingBraces, Lossless, uint32(fWrappingBraces)},
	{RungExtraCloser, Lossless, uint32(fExtraCloser)},
	{RungComments, Lossless, uint32(fComments)},
	{RungTrailingCommas, Lossless, uint32(fTrailingComma)},
	{RungMissingCommas, Lossless, uint32(fMissingComma)},
	{RungUnquotedKeys, Lossless, uint32(fUnquotedKeys)},
	{RungSingleQuotes, Lossless, uint32(fSingleQuotes)},
	{RungPythonLiterals, Lossless, uint32(fPythonLiterals)},
	{RungControlChars, Lossless, uint32(fControlChars)},
	{RungInvalidEscapes, Lossless, uint32(fInvalidEscapes)},
	{RungUnicodeSpaces, Lossless, uint32(fUnicodeSpace)},
}

// Rungs returns the ladder's rungs in the order they are reported.
func Rungs() []Rung { return rungs[:] }

// DefaultRepairLimit is the size above which nothing is repaired (1 MiB).
const DefaultRepairLimit = 1 << 20

// RepairOptions tunes the ladder; the zero value works.
type RepairOptions struct {
	// Limit is the size cap in bytes above which no rung beyond "as sent"
	// is tried; 0 (or a negative value) means DefaultRepairLimit.
	Limit int
	// Conservative refuses every Guessing rung. Destructive tools use it.
	// Every rung of today's ladder is Lossless, so it changes nothing: a
	// destructive tool gets every repair any other tool gets.
	Conservative bool
}

// Sentinel errors, matched with errors.Is. The error returned by Repair is
// a *SyntaxError wrapping one or two of them.
var (
	ErrArgumentsTooLarge = errors.New("arguments exceed the repair size limit")
	ErrUnparseable       = errors.New("arguments are not valid JSON")
	// ErrTruncated is wrapped, beside ErrUnparseable or
	// ErrArgumentsTooLarge, when the text ended before the object did.
	ErrTruncated = errors.New("arguments were cut off")
)

// SyntaxError is a refusal of arguments that no lossless rung makes
// readable. Its text is one sentence for the model: what is wrong, where,
// and what to send instead.
type SyntaxError struct {
	// Offset is the byte offset in the arguments as sent, -1 when the
	// problem is inside a double-encoded string's content.
	Offset int
	// Pointer is the JSON pointer of the value being read there ("" for
	// the root or when unknown).
	Pointer   string
	Truncated bool
	msg       string
	kinds     []error
}

func (e *SyntaxError) Error() string   { return e.msg }
func (e *SyntaxError) Unwrap() []error { return e.kinds }

const (
	// maxCandidates bounds the braces tried as the start of the object, so
	// that prose full of braces costs a bounded number of linear reads.
	maxCandidates = 16
)

// Repair returns valid JSON text for args, and the rungs that made it parse
// (nil when it parsed as sent). On a refusal it still returns the rungs
// that ran, with a *SyntaxError.
//
// Every rung is Lossless (see Rungs): the text is read once by a tolerant
// reader that accepts comments, trailing commas, unquoted keys, single
// quotes, Python literals, raw control characters and undefined escapes
// inside strings, members separated by white space only and one redundant
// pair of braces; around the object it accepts a BOM, Markdown fences,
// prose, template tokens and tool-call tags, and stray closers after it.
// A JSON string whose content is an object is read as that object.
//
// Nothing is ever closed, completed or dropped: a text that ends inside a
// string, number, literal or key, or before a container closes, is refused
// as cut off at its last byte, on every tool. Even a missing final '}'
// alone is not added: a text cut after a complete member reads the same,
// and would run without the members that followed. A text with two
// objects, or with an escape that has two readings (\' between double
// quotes), is refused too.
//
// Arguments longer than the limit are only checked as sent.
func Repair(args string, opt RepairOptions) ([]byte, []string, error) {
	text := trimJSONSpace(args)
	if text == "" {
		return []byte("{}"), nil, nil
	}
	var used uint32
	if t := trimJSONSpace(strings.TrimPrefix(text, "\uFEFF")); t != text {
		used, text = usedStripFences, t
	}
	var (
		out []byte
		err error
	)
	if b := []byte(text); json.Valid(b) {
		out = b
		// encoding/json takes strings that hold no text (a lone
		// surrogate, a byte that is not UTF-8) and values deeper than
		// MaxDepth: the decoder does not.
		if err := decodeCheck(text, strings.Index(args, text)); err != nil {
			return nil, rungNames(used), err
		}
		if text != "" && text[0] == '"' {
			var u uint32
			out, u, err = doubleEncoded(b)
			used |= u
		}
	} else {
		limit := opt.Limit
		if limit <= 0 {
			limit = DefaultRepairLimit
		}
		if len(args) > limit {
			return nil, nil, tooLarge(args, limit)
		}
		var u uint32
		out, u, err = read(args, true)
		used |= u
	}
	names := rungNames(used)
	if err != nil {
		return nil, names, err
	}
	if opt.Conservative {
		for _, r := range rungs {
			if r.Class == Guessing && used&r.bit != 0 {
				return nil, names, &SyntaxError{kinds: []error{ErrUnparseable},
					msg: "The arguments need a guess to be read (" + r.Name + "), which this tool does not accept; send one complete, valid JSON object."}
			}
		}
	}
	return out, names, nil
}

func rungNames(used uint32) []string {
	var names []string
	for _, r := range rungs {
		if used&r.bit != 0 {
			names = append(names, r.Name)
		}
	}
	return names
}

// decodeCheck refuses valid JSON text that the decoder will not take,
// with the decoder's reason; base is the offset of text in the arguments
// as sent (-1 when it is a double-encoded string's content).
func decodeCheck(text string, base int) *SyntaxError {
	_, _, err := decodeAnyNotes(text)
	var de *decodeError
	if !errors.As(err, &de) {
		return nil
	}
	se := refusal(text, &readError{off: de.off, what: de.what, unusable: true})
	if base < 0 {
		se.Offset = -1
		return se
	}
	// The message counts in the arguments as sent.
	se.Offset = base + de.off
	se.msg = strings.Replace(se.msg, fmt.Sprintf("at byte %d ", de.off), fmt.Sprintf("at byte %d ", se.Offset), 1)
	return se
}

// doubleEncoded handles valid JSON that is a string: when its content is
// an object (the schema of a function tool always wants one), that object
// is the arguments. Any other string is returned as sent, for the schema
// to refuse.
//
// JSON encoded twice ("\"{\\\"a\\\":1}\""), a string whose content is
// a JSON string holding the object, or three times (see peelStrings), has
// that one reading too.
func doubleEncoded(b []byte) ([]byte, uint32, error) {
	var inner string
	if json.Unmarshal(b, &inner) != nil {
		return b, 0, nil
	}
	inner = peelStrings(inner)
	if !strings.HasPrefix(trimJSONSpace(inner), "{") {
		return b, 0, nil
	}
	return readInner(inner)
}

// maxEncodings bounds the layers of JSON string around the object:
// a JSON string holding the object, one holding that string (JSON
// encoded twice), and one more (three times) are seen; a fourth layer is
// not an accident and is left for the schema to refuse.
const maxEncodings = 3

// peelStrings returns the content of a JSON string's content that is
// itself a complete JSON string (JSON encoded two or three times), as
// long as what is left is an object or another such string; otherwise
// inner as it is. Each layer is read by the strict decoder, so a layer
// that holds no text (a lone surrogate) is not taken off.
func peelStrings(inner string) string {
	for range maxEncodings - 1 {
		t := trimJSONSpace(inner)
		if !strings.HasPrefix(t, `"`) {
			break
		}
		d := decoder{s: t}
		s, err := d.str()
		if err != nil || d.i != len(t) {
			break
		}
		if c := trimJSONSpace(s); !strings.HasPrefix(c, "{") && !strings.HasPrefix(c, `"`) {
			break
		}
		inner = s
	}
	return inner
}

// readInner reads the object held in a JSON string (after peelStrings).
// Its own content is never taken as a string holding an object again.
func readInner(inner string) ([]byte, uint32, error) {
	inner = peelStrings(inner)
	if t := trimJSONSpace(inner); json.Valid([]byte(t)) {
		if err := decodeCheck(t, -1); err != nil {
			err.msg = innerMessage.Replace(err.msg)
			return nil, usedDoubleEncoded, err
		}
		return []byte(t), usedDoubleEncoded, nil
	}
	out, used, err := read(inner, false)
	used |= usedDoubleEncoded
	var se *SyntaxError
	if errors.As(err, &se) {
		// Offsets count in the string's content, not in the text sent.
		se.msg = innerMessage.Replace(se.msg)
		se.Offset = -1
	}
	return out, used, err
}

// read finds the one object in s and reads it with the tolerant reader.
// With outer, a string holding the object, followed by no other object
// ("{\"a\":1}"<|call|>), is read as that object.
func read(s string, outer bool) ([]byte, uint32, error) {
	base := 0
	var used uint32
	if strings.HasPrefix(s, "\uFEFF") {
		base = len("\uFEFF")
		used |= usedStripFences
	}
	for base < len(s) && isJSONSpace(s[base]) {
		base++
	}
	if q := quotedStart(s, base); outer && q >= 0 {
		t := &tolerant{s: s, i: q}
		var inner string
		switch {
		case t.str(s[q]):
			if strings.Contains(s[t.i:], "{") && json.Unmarshal(t.out, &inner) == nil && strings.HasPrefix(trimJSONSpace(peelStrings(inner)), "{") {
				if _, _, err := readInner(inner); err == nil {
					// "{\"a\":1}" and then {"a":2}: two objects.
					return nil, used, &SyntaxError{Offset: q, kinds: []error{ErrUnparseable}, msg: fmt.Sprintf(
						"The arguments hold more than one JSON object (one inside the string at byte %d, another after it); send exactly one JSON object.", q)}
				}
			}
			if !strings.Contains(s[t.i:], "{") && json.Unmarshal(t.out, &inner) == nil &&
				strings.HasPrefix(trimJSONSpace(peelStrings(inner)), "{") {
				if q > base || trimJSONSpace(s[t.i:]) != "" {
					used |= usedStripFences
				}
				out, u, err := readInner(inner)
				return out, used | uint32(t.used) | u, err
			}
		case t.err.truncated && strings.HasPrefix(trimJSONSpace(string(t.out[1:])), "{"):
			// "{\"a\": 1 — a double-encoded object cut off with its string.
			if q > base {
				used |= usedStripFences
			}
			return nil, used | uint32(t.used), refusal(s, t.err)
		}
	}

	var (
		found     *tolerant
		foundAt   int
		end       int
		firstErr  *readError
		firstUsed uint32
	)
	for i, tries := base, 0; i < len(s) && tries < maxCandidates; tries++ {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		at := i + j
		t, e, ok := readObject(s, at)
		if ok {
			if p := trimJSONSpace(s[base:at]); p != "" && json.Valid([]byte(p)) {
				return nil, used, refusal(s, &readError{off: base, ambiguous: true,
					what: "a JSON value comes before the object, and the arguments are one JSON object with every value inside it"})
			}
			if !prefixAllows(s[base:at]) || insideLarger(s[base:at], s[e:]) {
				return nil, used, refusal(s, &readError{off: at,
					what: "this object is part of a larger value that cannot be read, and taking it alone would drop the rest"})
			}
			found, foundAt, end = t, at, e
			break
		}
		if t.committed || t.err.ambiguous {
			// Evidently meant as the arguments: its error is the answer.
			if at > base {
				used |= usedStripFences
			}
			return nil, used | uint32(t.used), refusal(s, t.err)
		}
		// Failed before a first key and ':' were read, so perhaps prose
		// ("use '{' to open"): a later brace may still start the object,
		// and if none does, the first failure (a cut first of all) is the
		// answer.
		if firstErr == nil || (t.err.truncated && !firstErr.truncated) {
			firstErr, firstUsed = t.err, uint32(t.used)
			if at > base {
				firstUsed |= usedStripFences
			}
		}
		i = at + 1
	}
	if found == nil {
		if firstErr != nil {
			return nil, used | firstUsed, refusal(s, firstErr)
		}
		return nil, used, &SyntaxError{kinds: []error{ErrUnparseable},
			msg: "The arguments hold no JSON object; send the arguments as one JSON object."}
	}
	used |= uint32(found.used)

	// After the object: stray closers (nothing before it is left open
	// for them to close: insideLarger refused that), then anything that
	// is not a second object.
	rest := end
	{
		last := rest
		for k := rest; k < len(s) && (s[k] == '}' || s[k] == ']' || isJSONSpace(s[k])); k++ {
			if s[k] == '}' || s[k] == ']' {
				last = k + 1
			}
		}
		if last > rest {
			// Only the closers: the white space after them may still
			// separate prose ({"a":1}}\nDone.).
			used |= uint32(fExtraCloser)
			rest = last
		}
	}
	if rest < len(s) && !strings.ContainsRune(" \t\r\n<`.,;:!?){", rune(s[rest])) &&
		unicodeSpaceAt(s[rest:]) == 0 && !bracketToken(s[rest:]) {
		// Text glued to the object's end is rarely prose: more often an
		// unescaped quote ended a string, and with it the object, early.
		return nil, used, refusal(s, &readError{off: rest,
			what: "text follows the object without a space; if it belongs in a string, escape the string's quotes as \\\""})
	}
	if after := trimJSONSpace(s[rest:]); after != "" && (after[0] == ',' || after[0] == ':') || unopenedCloser(s[rest:]) {
		// {"a": {"b": 1}}, "c": 2}: a '}' too many closed the object
		// early, and the members after it would be dropped.
		return nil, used, refusal(s, &readError{off: rest,
			what: "the object closes here but the text after it goes on as part of it; remove the '}' that closes it early"})
	}
	if after := trimJSONSpace(s[rest:]); startsWithValue(after) {
		// {"a": true} "x": a value after the object is not prose.
		return nil, used, refusal(s, &readError{off: len(s) - len(strings.TrimLeft(s[rest:], " \t\r\n")), ambiguous: true,
			what: "a JSON value follows the object, and the arguments are one JSON object with every value inside it"})
	}
	for i, n := rest, 0; i < len(s) && n < maxCandidates; n++ {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 {
			break
		}
		at := i + j
		t, _, ok := readObject(s, at)
		if !ok && t.err.truncated {
			// A second object, or the start of one, cut off: {"a":1}{"b"
			// or {"a":1}{ (parallel calls' arguments run together).
			if t.i <= at+1 && !t.committed {
				return nil, used, refusal(s, t.err)
			}
			return nil, used, &SyntaxError{Offset: t.err.off, Truncated: true, kinds: []error{ErrUnparseable, ErrTruncated}, msg: fmt.Sprintf(
				"The arguments hold more than one JSON object (a second one starts at byte %d and is cut off at byte %d); send exactly one complete JSON object.", at, t.err.off)}
		}
		if ok || t.committed {
			return nil, used, &SyntaxError{Offset: at, kinds: []error{ErrUnparseable}, msg: fmt.Sprintf(
				"The arguments hold more than one JSON object (a second one starts at byte %d); send exactly one JSON object.", at)}
		}
		i = at + 1
	}
	if foundAt > base || trimJSONSpace(s[rest:]) != "" {
		used |= usedStripFences
	}
	return found.out, used, nil
}

// startsWithValue reports whether the text after the object starts with
// a JSON value: a string (even one cut off), or an array, number or
// literal that encoding/json reads as one.
func startsWithValue(a string) bool {
	if a == "" {
		return false
	}
	switch c := a[0]; {
	case c == '"':
		return true
	case c == '\'':
		// A complete single-quoted string ('x'), not an apostrophe in prose.
		t := &tolerant{s: a}
		return t.str('\'') && (t.i == len(a) || isJSONSpace(a[t.i]) || strings.ContainsRune(",.;:!?)]}", rune(a[t.i])))
	case c == '[' && bracketToken(a):
		return false
	case c == '[' || c == '-' || isDigit(c) || c == 't' || c == 'f' || c == 'n':
		var raw json.RawMessage
		return json.NewDecoder(strings.NewReader(a)).Decode(&raw) == nil
	}
	return false
}

// prefixAllows reports whether the text before the object can be prose:
// an object right after '[', '{', ':', ',' or a quote is part of a larger
// value.
func prefixAllows(p string) bool {
	if nl := strings.LastIndexByte(p, '\n'); nl >= 0 {
		// The text right before the object is a fence's opening line,
		// whatever its info string holds (```json title="args.json").
		line := trimJSONSpace(p[:nl])
		if k := strings.LastIndexByte(line, '\n'); k >= 0 {
			line = line[k+1:]
		}
		if trimJSONSpace(p[nl:]) == "" && strings.HasPrefix(trimJSONSpace(line), "```") {
			return true
		}
	}
	p = trimJSONSpace(p)
	if p == "" {
		return true
	}
	switch p[len(p)-1] {
	case '[', '{', ',', '"', '\'':
		return false
	case ':':
		// "Here are the arguments: {…}" is prose; `"a": {…}` is not.
		q := trimJSONSpace(p[:len(p)-1])
		return q != "" && q[len(q)-1] != '"' && q[len(q)-1] != '\''
	}
	return true
}

// quotedStart returns the offset of the '"' or '\” that opens a string
// holding the arguments (a double-encoded object): at base, or after a
// fence's opening line (whatever its info string holds), template tokens
// and tags ("<|message|>", "<tool_call>") or prose; -1 if there is none.
func quotedStart(s string, base int) int {
	if strings.HasPrefix(s[base:], "```") {
		nl := strings.IndexByte(s[base:], '\n')
		if nl < 0 {
			return -1
		}
		base += nl + 1
		for base < len(s) && isJSONSpace(s[base]) {
			base++
		}
	}
	j := strings.IndexAny(s[base:], "\"'")
	if j < 0 {
		return -1
	}
	q := base + j
	p := trimJSONSpace(s[base:q])
	switch {
	case p == "":
	case j <= 256 && p[0] == '<' && p[len(p)-1] == '>' && !strings.Contains(p, "{"):
	default:
		// Prose before a double-quoted string ("Here you go:
		// \"{\\\"a\\\": 1}\""); an apostrophe in the prose is no quote.
		j = strings.IndexByte(s[base:], '"')
		if j < 0 {
			return -1
		}
		q = base + j
		if p = trimJSONSpace(s[base:q]); strings.ContainsAny(p, "{}[]<>`") || !prefixAllows(p) || json.Valid([]byte(p)) {
			return -1
		}
	}
	return q
}

// insideLarger reports whether the object between before and after is a
// value inside a larger one that does not parse: an opener before it that
// a closer after it closes ({ "a" = "x", "b" = {…} }), or a call's
// keyword argument (f(a=1, b={…})).
func insideLarger(before, after string) bool {
	var open [3]int // { [ (
	for i := 0; i < len(before); i++ {
		switch before[i] {
		case '{':
			open[0]++
		case '[':
			open[1]++
		case '(':
			open[2]++
		case '}':
			open[0] = max(open[0]-1, 0)
		case ']':
			open[1] = max(open[1]-1, 0)
		case ')':
			open[2] = max(open[2]-1, 0)
		}
	}
	p := trimJSONSpace(before)
	return open[0] > 0 && strings.Contains(after, "}") ||
		open[1] > 0 && strings.Contains(after, "]") ||
		open[2] > 0 && strings.HasSuffix(p, "=")
}

// bracketToken reports whether s starts with a template token in square
// brackets, as Mistral's are ([TOOL_CALLS], [/TOOL_RESULTS]).
func bracketToken(s string) bool {
	i := 1
	if len(s) > 1 && s[1] == '/' {
		i = 2
	}
	if len(s) <= i || s[0] != '[' {
		return false
	}
	j := i
	for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z') {
		j++
	}
	return j > i && j < len(s) && s[j] == ']'
}

// unopenedCloser reports whether s has a '}' or ']' that nothing in s
// opened: text after the object that closes a value it is part of.
func unopenedCloser(s string) bool {
	var braces, brackets int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			braces++
		case '[':
			brackets++
		case '}':
			if braces--; braces < 0 {
				return true
			}
		case ']':
			if brackets--; brackets < 0 {
				return true
			}
		}
	}
	return false
}

// refusal turns a reader error into the sentence the model reads.
func refusal(s string, e *readError) *SyntaxError {
	se := refusalText(s, e)
	se.msg = textclip.Cut(se.msg, MaxMessageBytes, "….") // still a sentence
	return se
}

func refusalText(s string, e *readError) *SyntaxError {
	where, in := "", ""
	ptr := e.ptr
	if len(ptr) > MaxPointerBytes { // its first and last segments kept
		ptr = textclip.Head(ptr, MaxPointerBytes/2) + "/…" + textclip.Tail(ptr, MaxPointerBytes/2-len("/…"))
	}
	if ptr != "" {
		where, in = " at "+ptr, "in "+ptr+", "
	}
	se := &SyntaxError{Offset: e.off, Pointer: ptr, kinds: []error{ErrUnparseable}}
	switch {
	case e.truncated:
		se.Truncated = true
		se.kinds = append(se.kinds, ErrTruncated)
		se.msg = fmt.Sprintf("The arguments were cut off at byte %d, inside %s%s; they must be sent whole: send the complete JSON object again.",
			e.off, e.what, where)
	case e.ambiguous:
		se.msg = fmt.Sprintf("The arguments have two readings at byte %d (%snear %q): %s.",
			e.off, in, excerpt(s, e.off, 24), e.what)
	case e.unusable:
		se.msg = fmt.Sprintf("The arguments cannot be used as sent at byte %d (%snear %q): %s.",
			e.off, in, excerpt(s, e.off, 24), e.what)
	default:
		se.msg = fmt.Sprintf("The arguments are not valid JSON at byte %d (%snear %q): %s; send one JSON object with double-quoted keys and strings.",
			e.off, in, excerpt(s, e.off, 24), e.what)
	}
	return se
}

// tooLarge refuses arguments over the repair limit, which are only checked
// as sent; a cut is still called a cut.
func tooLarge(args string, limit int) error {
	var se *json.SyntaxError
	err := json.Unmarshal([]byte(args), new(json.RawMessage))
	if !errors.As(err, &se) || int(se.Offset) >= len(trimJSONSpace(args)) {
		return &SyntaxError{Offset: len(args), Truncated: true, kinds: []error{ErrArgumentsTooLarge, ErrTruncated}, msg: fmt.Sprintf(
			"The arguments were cut off at byte %d; they must be sent whole: send the complete JSON object again, as valid JSON (over the %d-byte repair limit nothing is repaired).",
			len(args), limit)}
	}
	off := int(se.Offset)
	return &SyntaxError{Offset: off, kinds: []error{ErrArgumentsTooLarge}, msg: fmt.Sprintf(
		"The arguments are not valid JSON at byte %d (near %q): %s; send valid JSON (at %d bytes they are over the %d-byte repair limit, so nothing is repaired).",
		off, excerpt(args, off, 24), se.Error(), len(args), limit)}
}

// excerpt returns up to n bytes of s on either side of off, cut on UTF-8
// character boundaries.
func excerpt(s string, off, n int) string {
	off = min(max(off, 0), len(s))
	lo, hi := max(off-n, 0), min(off+n, len(s))
	for lo < off && !utf8.RuneStart(s[lo]) {
		lo++
	}
	for hi > off && hi < len(s) && !utf8.RuneStart(s[hi]) {
		hi--
	}
	return s[lo:hi]
}

// innerMessage rewrites a refusal of a double-encoded object's text.
var innerMessage = strings.NewReplacer(
	"The arguments are ", "The object in the arguments' JSON string (offsets count in its content) is ",
	"The arguments were ", "The object in the arguments' JSON string (offsets count in its content) was ",
	"The arguments hold ", "The arguments' JSON string (offsets count in its content) holds ",
	"The arguments have ", "The object in the arguments' JSON string (offsets count in its content) has ",
	"The arguments cannot ", "The object in the arguments' JSON string (offsets count in its content) cannot ",
)

// trimJSONSpace trims the four whitespace bytes JSON allows. Other Unicode
// spaces are left alone: removing them would be a silent repair.
func trimJSONSpace(s string) string {
	return strings.Trim(s, " \t\r\n")
}

func isJSONSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n'
}
