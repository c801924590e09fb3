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
	var seen uint8
	ok := s.object(func(key []byte) bool {
		var bit uint8
		switch string(key) {
		case "agent_id":
			bit, w.AgentID = 1, s.plain()
		case "turn_id":
			bit, w.TurnID = 2, s.plain()
		case "step":
			bit = 4
			n, ok := s.integer()
			if !ok {
				return false
			}
			w.Step = &n
		case "context":
			bit, w.Context = 8, s.context()
			if w.Context == nil {
				return false
			}
		case "output":
			bit, w.Output = 16, s.output()
			if w.Output == nil {
				return false
			}
		default:
			return s.unknown(key, "agent_id", "turn_id", "step", "context", "output")
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !s.bad
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
	var seen uint8
	ok := s.object(func(key []byte) bool {
		var bit uint8
		switch string(key) {
		case "kind":
			bit, c.Kind = 1, s.plain()
		case "workflow_id":
			bit, c.WorkflowID = 2, s.plain()
		case "task_id":
			bit, c.TaskID = 4, s.plain()
		case "bindings":
			bit, c.Bindings = 8, map[string]bool{}
			if !s.object(func(key []byte) bool {
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
			}) {
				return false
			}
		case "skills":
			bit, c.Skills = 16, s.strings()
		case "mcp_servers":
			bit, c.MCPServers = 32, s.strings()
		default:
			return s.unknown(key, "kind", "bindings", "skills", "mcp_servers", "workflow_id", "task_id", "approval", "fairness")
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return !s.bad
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
		var seen uint8
		if !s.object(func(key []byte) bool {
			var bit uint8
			switch string(key) {
			case "type":
				bit, it.Type = 1, s.plain()
			case "call_id":
				bit, it.CallID = 2, s.plain()
			case "namespace":
				bit, it.Namespace = 4, s.plain()
			case "name":
				bit, it.Name = 8, s.plain()
			case "execution":
				bit, it.Execution = 16, s.plain()
			case "arguments":
				bit, it.Arguments = 32, s.raw()
			case "content":
				bit, it.Content = 64, s.raw()
			default:
				return s.unknown(key, "type", "call_id", "namespace", "name", "execution", "arguments", "content")
			}
			if seen&bit != 0 {
				return false
			}
			seen |= bit
			return !s.bad
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
