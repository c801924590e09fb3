package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// flagError is a setting found wrong once the worker began to start (a
// mistyped approval level, the storage of an existing data directory):
// like a bad flag, it exits 2 with one line saying what to change.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// friendlyValue wraps a flag's value so that a value that does not parse
// says which flag, what it must be, and the fix ("use 5s"), in the same
// words whether it came from the command line or from WORKER_<FLAG>.
type friendlyValue struct {
	flag.Value
	name string
	// last is the last error of a Set, for ParseFlags to return instead
	// of the flag package's own wording.
	last *error
}

// friendlyBool is a friendlyValue of a boolean flag (--flag alone is
// true).
type friendlyBool struct{ friendlyValue }

func (friendlyBool) IsBoolFlag() bool { return true }

// friendly wraps every flag of fs.
func friendly(fs *flag.FlagSet, last *error) {
	fs.VisitAll(func(f *flag.Flag) {
		v := friendlyValue{Value: f.Value, name: f.Name, last: last}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			f.Value = friendlyBool{v}
			return
		}
		f.Value = v
	})
}

// String is the wrapped value's; the zero friendlyValue, which the flag
// package makes to tell a default from the zero value in --help, is "".
func (v friendlyValue) String() string {
	if v.Value == nil {
		return ""
	}
	return v.Value.String()
}

func (v friendlyValue) Set(s string) error {
	err := v.Value.Set(s)
	if err == nil {
		return nil
	}
	var want, fix string
	switch v.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		want = "a duration with its unit (300ms, 5s, 2m, 1h)"
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			fix = fmt.Sprintf(": use %ss", s)
		}
	case int, int64, uint, uint64:
		want = "a whole number"
		if n, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			fix = fmt.Sprintf(": use %d", int64(n))
		}
	case bool:
		want = "true or false"
	default:
		want = "valid"
		fix = ": " + err.Error()
	}
	err = fmt.Errorf("--%s must be %s, not %q%s", v.name, want, s, fix)
	*v.last = err
	return err
}

// levels are the approval levels a mistyped entry is compared with.
var levels = []string{"none", protocol.ApprovalDestructive, protocol.ApprovalAll}

// knownTools are the tools the worker knows at start: those the
// categories offer a main turn that binds them all, and the namespaces of
// the configured MCP servers (whose tools are listed per turn).
type knownTools struct {
	names      map[string]bool // "name" or "namespace.name"
	namespaces map[string]bool
	mcp        map[string]bool // the MCP servers' namespaces
}

func (k knownTools) matches(entry string) bool {
	ns, name, scoped := strings.Cut(entry, ".")
	if !scoped {
		return k.names[entry]
	}
	return k.mcp[ns] || k.namespaces[ns] && (name == "*" || k.names[entry])
}

// knownAtStart asks every category but MCP's for the tools of a main turn
// that binds every category and enables every skill.
func (m *program) knownAtStart(ctx context.Context, es []tool.Category) knownTools {
	k := knownTools{names: map[string]bool{}, namespaces: map[string]bool{}, mcp: map[string]bool{}}
	bindings := map[string]bool{}
	for _, e := range es {
		bindings[e.Name] = true
	}
	env := turn.Env{AgentID: "approval-check", TurnID: "start", Context: protocol.Context{Kind: protocol.KindText, Bindings: bindings, Skills: m.skills.Names()}}
	for _, e := range es {
		if e.Name == "mcp" {
			continue // it would connect to every server
		}
		set, err := turn.NewAssembler(e).Assemble(ctx, env)
		if err != nil {
			m.log.Debug("approval check: a category lists no tools at start", "category", e.Name, "err", err)
			continue
		}
		for _, t := range set.Tools() {
			sp := t.Spec()
			if sp.Namespace == "" {
				k.names[sp.Name] = true
				continue
			}
			k.names[sp.Namespace+"."+sp.Name] = true
			k.namespaces[sp.Namespace] = true
		}
	}
	if m.mcp != nil {
		for ns := range m.mcp.Servers {
			k.mcp[ns] = true
		}
	}
	return k
}

// checkApproval refuses an --approval entry that looks like a mistyped
// level and is no tool known at start, warns of every entry that matches
// no tool known at start, and logs the effective policy in one line.
func (m *program) checkApproval(ctx context.Context, es []tool.Category) error {
	fromFlag, _ := turn.ParsePolicy(m.Approval) // validate parsed it already
	k := m.knownAtStart(ctx, es)
	var errs []error
	for _, e := range fromFlag.Names {
		if k.matches(e) {
			continue
		}
		if level := nearLevel(e); level != "" {
			errs = append(errs, fmt.Errorf("--approval: %q is not a tool, did you mean the level %q?", e, level))
			continue
		}
		m.log.Warn("--approval names no tool known at start: it holds nothing unless such a tool appears in a turn", "entry", e)
	}
	if err := errors.Join(errs...); err != nil {
		return &flagError{err}
	}
	p := m.Worker.Approval
	m.log.Info("approval policy", "holds", describePolicy(p), "timeout", p.Timeout)
	return nil
}

// describePolicy says which calls of main turns p holds for approval.
func describePolicy(p turn.Policy) string {
	var parts []string
	switch {
	case p.All:
		return "every call of main turns"
	case p.Destructive:
		parts = append(parts, "destructive calls")
	}
	if len(p.Names) > 0 {
		parts = append(parts, "calls of "+strings.Join(p.Names, ", "))
	}
	if len(parts) == 0 {
		return "no call (a step's context.approval may add some)"
	}
	return strings.Join(parts, ", and ")
}

// nearLevel returns the approval level entry is within two edits of
// (Damerau-Levenshtein, case ignored), or "".
func nearLevel(entry string) string {
	e := strings.ToLower(entry)
	best, at := 3, ""
	for _, l := range levels {
		if d := editDistance(e, l); d < best {
			best, at = d, l
		}
	}
	return at
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and transpositions of neighbours.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = slices.Min([]int{d[i-1][j] + 1, d[i][j-1] + 1, d[i-1][j-1] + cost})
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// storageHint says what to do when the streams and buckets exist with
// the other storage than --storage asks for.
func (m *program) storageHint(err error) error {
	if err == nil || !strings.Contains(err.Error(), "can not change storage type") {
		return err
	}
	other := "file"
	if m.Storage == "file" {
		other = "memory"
	}
	fix := "delete them on the server (nats stream rm, nats kv rm) to change it"
	where := "on the NATS server"
	if m.Conn.URL == "" {
		where = "in data directory " + m.DataDir
		fix = "give this run another --data-dir, or delete that directory (and the messages in it) to change it"
	}
	return &flagError{fmt.Errorf("--storage %s: the streams and buckets %s were made with --storage %s: keep --storage %s, or %s (%v)", m.Storage, where, other, other, fix, err)}
}
