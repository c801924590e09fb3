package protocol

import (
	"bytes"
	"strconv"
	"strings"
	"unicode/utf8"
)

// scanStep decodes data into a stepWire as json.Unmarshal does, for the
// steps gateways write: reflection over the step was a sixteenth of a
// no-op step's CPU. It takes only what it can decode exactly as
// json.Unmarshal would, and says so with ok; for anything else (a string
// with escapes where a field's value is read, a key json.Unmarshal would
// match only by case folding, a key given twice, a null or a value of
// another type where a field is read, the context's approval or
// fairness, nesting over maxScanDepth, invalid JSON) ok is
// false and ParseStep leaves the step to json.Unmarshal, which says what
// is wrong with it. Values it does not keep (unknown keys, an item's
// arguments and content) are checked as JSON and passed over, escapes
// and all.
func scanStep(data []byte) (stepWire, bool) {
	s := scanner{d: data}
	var w stepWire
	ok := s.fields(stepFields, func(name string) bool {
		switch name {
		case "agent_id":
			w.AgentID = s.plain()
		case "turn_id":
			w.TurnID = s.plain()
		case "step":
			n, ok := s.integer()
			if !ok {
				return false
			}
			w.Step = &n
		case "context":
			w.Context = s.context()
			return w.Context != nil
		case "output":
			w.Output = s.output()
			return w.Output != nil
		}
		return true
	})
	if s.ws(); !ok || s.bad || s.i != len(s.d) {
		return stepWire{}, false
	}
	return w, true
}

// maxScanDepth bounds the nesting scanStep passes over; json.Unmarshal's
// own bound is far deeper.
const maxScanDepth = 64

// scanner reads JSON from d at i. A value it cannot take sets bad.
type scanner struct {
	d   []byte
	i   int
	bad bool
}

func (s *scanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next passes c, after whitespace, and reports whether it was there.
func (s *scanner) next(c byte) bool {
	if s.ws(); s.i < len(s.d) && s.d[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object reads an object, calling field at each key with the scanner
// before the key's value; field reads the value.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.next('{') {
		return false
	}
	if s.next('}') {
		return true
	}
	for {
		key, ok := s.plainBytes()
		if !ok || !s.next(':') || !field(key) {
			return false
		}
		if !s.next(',') {
			return s.next('}')
		}
	}
}

// The keys scanStep reads (or, for the context's approval and fairness,
// leaves to json.Unmarshal).
var (
	stepFields    = []string{"agent_id", "turn_id", "step", "context", "output"}
	contextFields = []string{"kind", "workflow_id", "task_id", "bindings", "skills", "mcp_servers", "approval", "fairness"}
	itemFields    = []string{"type", "call_id", "namespace", "name", "execution", "arguments", "content"}
)

// fields reads an object, calling read at each key among names (with
// that name) before the key's value; read reads the value. A key given
// twice ends it, as does a key of no name that json.Unmarshal might
// match to one (see unknown); the values of other keys are passed over.
func (s *scanner) fields(names []string, read func(name string) bool) bool {
	var seen uint64
	return s.object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return read(n) && !s.bad
			}
		}
		return s.unknown(key, names...)
	})
}

// unknown passes over the value of a key that names no field of names:
// one json.Unmarshal would match to a field by folding its case (or one
// outside ASCII, which Unicode folding might match) is not taken.
func (s *scanner) unknown(key []byte, names ...string) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return false
		}
	}
	return s.skip(0)
}

// plainBytes reads a string without escapes, control characters or
// invalid UTF-8: its bytes are what json.Unmarshal decodes it to.
func (s *scanner) plainBytes() ([]byte, bool) {
	if !s.next('"') {
		return nil, false
	}
	start, ascii := s.i, true
	for j := start; j < len(s.d); j++ {
		switch c := s.d[j]; {
		case c == '"':
			v := s.d[start:j]
			if !ascii && !utf8.Valid(v) {
				return nil, false
			}
			s.i = j + 1
			return v, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// plain reads a field's string value (plainBytes).
func (s *scanner) plain() string {
	v, ok := s.plainBytes()
	if !ok {
		s.bad = true
	}
	return string(v)
}

// integer reads a number without fraction or exponent that fits an
// int64 with room to spare.
func (s *scanner) integer() (int64, bool) {
	s.ws()
	start := s.i
	if !s.number() {
		return 0, false
	}
	v := s.d[start:s.i]
	if len(v) > 18 || bytes.ContainsAny(v, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// context reads a step's context: all but its approval and fairness.
func (s *scanner) context() *Context {
	c := new(Context)
	ok := s.fields(contextFields, func(name string) bool {
		switch name {
		case "kind":
			c.Kind = s.plain()
		case "workflow_id":
			c.WorkflowID = s.plain()
		case "task_id":
			c.TaskID = s.plain()
		case "bindings":
			c.Bindings = map[string]bool{}
			return s.object(func(key []byte) bool {
				s.ws()
				switch {
				case bytes.HasPrefix(s.d[s.i:], []byte("true")):
					c.Bindings[string(key)], s.i = true, s.i+4
				case bytes.HasPrefix(s.d[s.i:], []byte("false")):
					c.Bindings[string(key)], s.i = false, s.i+5
				default:
					return false
				}
				return true
			})
		case "skills":
			c.Skills = s.strings()
		case "mcp_servers":
			c.MCPServers = s.strings()
		default: // approval, fairness: json.Unmarshal's
			return false
		}
		return true
	})
	if !ok || s.bad {
		return nil
	}
	return c
}

// strings reads an array of strings (plainBytes).
func (s *scanner) strings() []string {
	if !s.next('[') {
		s.bad = true
		return nil
	}
	v := []string{}
	if s.next(']') {
		return v
	}
	for {
		v = append(v, s.plain())
		if s.bad {
			return nil
		}
		if !s.next(',') {
			if !s.next(']') {
				s.bad = true
			}
			return v
		}
	}
}

// output reads the items of a step's output.
func (s *scanner) output() []itemWire {
	if !s.next('[') {
		return nil
	}
	items := []itemWire{}
	if s.next(']') {
		return items
	}
	for {
		var it itemWire
		if !s.fields(itemFields, func(name string) bool {
			switch name {
			case "type":
				it.Type = s.plain()
			case "call_id":
				it.CallID = s.plain()
			case "namespace":
				it.Namespace = s.plain()
			case "name":
				it.Name = s.plain()
			case "execution":
				it.Execution = s.plain()
			case "arguments":
				it.Arguments = s.raw()
			case "content":
				it.Content = s.raw()
			}
			return true
		}) || s.bad {
			return nil
		}
		items = append(items, it)
		if !s.next(',') {
			if !s.next(']') {
				return nil
			}
			return items
		}
	}
}

// raw reads any value, and returns a copy of its bytes.
func (s *scanner) raw() []byte {
	s.ws()
	start := s.i
	if !s.skip(0) {
		s.bad = true
		return nil
	}
	return bytes.Clone(s.d[start:s.i])
}

// skip passes over any value, checking it as JSON.
func (s *scanner) skip(depth int) bool {
	if s.ws(); s.i >= len(s.d) {
		return false
	}
	switch c := s.d[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{' || c == '[':
		if depth >= maxScanDepth {
			return false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.i++
		if s.next(end) {
			return true
		}
		for {
			if c == '{' {
				if s.ws(); s.i >= len(s.d) || s.d[s.i] != '"' || !s.skipString() || !s.next(':') {
					return false
				}
			}
			if !s.skip(depth + 1) {
				return false
			}
			if !s.next(',') {
				return s.next(end)
			}
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	}
	for _, lit := range []string{"true", "false", "null"} {
		if bytes.HasPrefix(s.d[s.i:], []byte(lit)) {
			s.i += len(lit)
			return true
		}
	}
	return false
}

// skipString passes over a string, escapes included, as JSON allows it.
func (s *scanner) skipString() bool {
	for j := s.i + 1; j < len(s.d); {
		switch c := s.d[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if j+1 >= len(s.d) {
				return false
			}
			switch s.d[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(s.d) {
					return false
				}
				for _, h := range s.d[j+2 : j+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				j += 6
			default:
				return false
			}
		default:
			j++
		}
	}
	return false
}

// number passes over a number as JSON writes one.
func (s *scanner) number() bool {
	d, j := s.d, s.i
	digits := func() bool {
		k := j
		for j < len(d) && '0' <= d[j] && d[j] <= '9' {
			j++
		}
		return j > k
	}
	if j < len(d) && d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case !digits():
		return false
	}
	if j < len(d) && d[j] == '.' {
		j++
		if !digits() {
			return false
		}
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		if !digits() {
			return false
		}
	}
	s.i = j
	return true
}
