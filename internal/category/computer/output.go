package computer

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// clip fits text into budget bytes, keeping its head and its tail and
// putting a note in the middle that says how much was left out and, when
// where is not empty, where the whole text is. It reports whether it cut.
func clip(text string, budget int, where string) (string, bool) {
	if len(text) <= budget {
		return text, false
	}
	keep := max(budget-noteReserve, 0)
	head := textclip.Head(text, keep/2)
	tail := textclip.Tail(text, keep-len(head))
	return head + elisionNote(int64(len(text)-len(head)-len(tail)), where) + tail, true
}

// noteReserve is the part of a budget kept for the elision note and the
// lines a tool adds around the clipped text.
const noteReserve = 512

func elisionNote(elided int64, where string) string {
	n := fmt.Sprintf("\n[… %s elided", textclip.ByteCount(elided))
	if where != "" {
		n += "; the full text is in " + where + " (read it in ranges with read_file)"
	}
	return n + " …]\n"
}

// capture is where a command's combined output goes: the first headMax
// and the last tailMax bytes are kept in memory for the model, and
// everything, up to logMax bytes, is copied to log. It counts every byte.
// It never fails a write, so a command is never killed by SIGPIPE because
// the log filled up: what cannot be kept is counted and dropped.
type capture struct {
	mu      sync.Mutex
	headMax int
	tailMax int
	head    []byte
	tail    []byte
	total   int64

	// openLog makes the log, at the first write; nil: no log. log is
	// what it made.
	openLog   func() (io.WriteCloser, error)
	log       io.Writer
	logMax    int64
	logged    int64
	logCut    bool  // the log stopped at logMax
	logFailed error // the log stopped on a write error

	// progress, when set, hears the byte count after each write: the
	// dispatcher's reporter keeps only the latest, so this costs a
	// label and a lock per write (a pipe read each), nothing more.
	progress func(total int64)
}

// outputProgress reports a command's output so far: "12.0 KiB of
// output", done the byte count, no total. Nil when nobody listens. The
// label is formatted again only when its rounded size changes, so most
// writes of a large output report without allocating. Called under the
// capture's lock, like the state it keeps.
func outputProgress(ctx context.Context) func(int64) {
	if !tool.ProgressWanted(ctx) {
		return nil
	}
	var shown int64 = -1
	var label string
	return func(n int64) {
		if k := shownSize(n); k != shown {
			shown, label = k, textclip.ByteCount(n)+" of output"
		}
		tool.ReportProgress(ctx, n, 0, label)
	}
}

// shownSize is what textclip.ByteCount(n) shows, as one number: n below 1 KiB,
// else tenths of the unit plus the unit's rank in the top bits.
func shownSize(n int64) int64 {
	if n < 1024 {
		return n
	}
	div, exp := int64(1024), int64(1)
	for m := n / 1024; m >= 1024; m /= 1024 {
		div *= 1024
		exp++
	}
	// byteCount shows %.1f of n/div: the exact value rounded, ties to
	// even; n/div has few fraction bits, so times ten it is exact.
	return exp<<56 | int64(math.RoundToEven(float64(n)/float64(div)*10))
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += int64(len(p))
	rest := p
	if room := c.headMax - len(c.head); room > 0 {
		n := min(room, len(rest))
		c.head = append(c.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 && c.tailMax > 0 {
		if len(rest) >= c.tailMax {
			c.tail = append(c.tail[:0], rest[len(rest)-c.tailMax:]...)
		} else {
			c.tail = append(c.tail, rest...)
			// Compact only when the slack is as large as the window, so
			// each byte is moved a bounded number of times.
			if len(c.tail) >= 2*c.tailMax {
				c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
			}
		}
	}
	c.writeLog(p)
	if c.progress != nil {
		c.progress(c.total)
	}
	return len(p), nil
}

func (c *capture) writeLog(p []byte) {
	if c.log == nil && c.openLog != nil && c.logFailed == nil {
		if f, err := c.openLog(); err != nil {
			c.logFailed = err
		} else {
			c.log = f
		}
		c.openLog = nil
	}
	if c.log == nil || c.logCut || c.logFailed != nil {
		return
	}
	if room := c.logMax - c.logged; int64(len(p)) > room {
		p = p[:room]
		c.logCut = true
	}
	n, err := c.log.Write(p)
	c.logged += int64(n)
	if err != nil {
		c.logFailed = err
	}
}

// hasLog says whether the log exists: not when nothing was written, or
// when it could not be made (logFailed says why).
func (c *capture) hasLog() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log != nil
}

// closeLog closes the log, if one was made.
func (c *capture) closeLog() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.log.(io.Closer); ok {
		_ = f.Close()
	}
}

// text renders what was captured: all of it when it fit, otherwise the
// head, a note naming where the full output is, and the tail. Invalid
// UTF-8 (binary output) is replaced, so the model reads text.
func (c *capture) text(where string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := c.tail
	if len(tail) > c.tailMax {
		tail = tail[len(tail)-c.tailMax:]
	}
	if c.total <= int64(len(c.head)+len(tail)) {
		// Nothing was dropped: head and tail are the output, in order
		// (the tail only begins where the head ended).
		return strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD"), false
	}
	head := wholeRunesHead(c.head)
	tailS := wholeRunesTail(tail)
	elided := c.total - int64(len(head)) - int64(len(tailS))
	return strings.ToValidUTF8(head, "\uFFFD") + elisionNote(elided, where) + strings.ToValidUTF8(tailS, "\uFFFD"), true
}

// wholeRunesHead drops an incomplete UTF-8 sequence at the end of b.
func wholeRunesHead(b []byte) string {
	s := string(b)
	for j := len(s) - 1; j >= 0 && j >= len(s)-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			if !utf8.FullRuneInString(s[j:]) {
				return s[:j]
			}
			break
		}
	}
	return s
}

// wholeRunesTail drops the continuation bytes at the start of b.
func wholeRunesTail(b []byte) string {
	i := 0
	for i < len(b) && i < utf8.UTFMax && !utf8.RuneStart(b[i]) {
		i++
	}
	return string(b[i:])
}
