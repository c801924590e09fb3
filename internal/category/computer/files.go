package computer

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/media"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/tool"
)

// maxListEntries bounds the entries list_files looks at, whatever the
// budget; a deep tree is cut rather than walked to the end.
const maxListEntries = 2000

// ListParams are list_files' parameters.
type ListParams struct {
	Path  string `json:"path,omitempty" jsonschema:"description=The directory to list\\, relative to your home (default: the home itself)."`
	Depth int    `json:"depth,omitempty" jsonschema:"description=How many levels to descend: 1 lists the directory's own entries (the default).,minimum=1,maximum=10"`
}

// ReadParams are read_file's parameters.
type ReadParams struct {
	Path      string `json:"path" jsonschema:"description=The file to read\\, relative to your home.,minLength=1"`
	StartLine int    `json:"start_line,omitempty" jsonschema:"description=First line to read (1-based; default 1).,minimum=1"`
	EndLine   int    `json:"end_line,omitempty" jsonschema:"description=Last line to read (inclusive; default: as far as the output budget allows).,minimum=1"`
	Offset    int64  `json:"offset,omitempty" jsonschema:"description=Read bytes instead of lines\\, starting at this byte offset.,minimum=0"`
	Length    int64  `json:"length,omitempty" jsonschema:"description=With offset: how many bytes to read (default: as many as the output budget allows).,minimum=1"`
}

// WriteParams are write_file's parameters.
type WriteParams struct {
	Path    string `json:"path" jsonschema:"description=The file to write\\, relative to your home. Missing parent directories are created.,minLength=1"`
	Content string `json:"content" jsonschema:"description=The file's complete new content."`
	Append  bool   `json:"append,omitempty" jsonschema:"description=Add content at the end of the file instead of replacing it."`
}

// EditParams are edit_file's parameters.
type EditParams struct {
	Path       string `json:"path" jsonschema:"description=The file to edit\\, relative to your home.,minLength=1"`
	OldText    string `json:"old_text" jsonschema:"description=The exact text to replace\\, whitespace and line breaks included. It must occur exactly once unless replace_all is set.,minLength=1"`
	NewText    string `json:"new_text" jsonschema:"description=The text to put in its place."`
	ReplaceAll bool   `json:"replace_all,omitempty" jsonschema:"description=Replace every occurrence instead of requiring exactly one."`
}

func (c *Category) listFiles() *tool.Tool {
	return tool.Must(tool.Def[ListParams]{
		Spec: tool.Spec{Name: ListFilesName, ReadOnly: true,
			Description: "List the files and directories in your home directory or one of its subdirectories: directories end with /, symbolic links show their target, files their size."},
		Activity: func(p ListParams) string { return "Listing " + displayPath(p.Path) },
		Execute:  c.list,
	})
}

func (c *Category) readFile() *tool.Tool {
	return tool.Must(tool.Def[ReadParams]{
		Spec: tool.Spec{Name: ReadFileName, ReadOnly: true,
			Description: fmt.Sprintf("Read a text file in your home directory: by lines (start_line, end_line) or by bytes (offset, length). At most %s comes back per call; the answer says how to read on. "+
				"An image (PNG, JPEG, GIF, WebP) or a PDF comes back whole for you to see, an image scaled down when it is large.", textclip.ByteCount(int64(c.cfg.OutputBudget)))},
		Activity: func(p ReadParams) string { return "Reading " + displayPath(p.Path) },
		Execute:  c.read,
	})
}

func (c *Category) writeFile() *tool.Tool {
	return tool.Must(tool.Def[WriteParams]{
		Spec: tool.Spec{Name: WriteFileName,
			Description: "Write a file in your home directory, replacing its content (or appending to it). Creates the file and its missing parent directories."},
		Activity: func(p WriteParams) string { return "Writing " + displayPath(p.Path) },
		Execute:  c.write,
	})
}

func (c *Category) editFile() *tool.Tool {
	return tool.Must(tool.Def[EditParams]{
		Spec: tool.Spec{Name: EditFileName,
			Description: "Edit a file in your home directory by exact replacement: old_text must occur exactly once (or set replace_all). Read the file first and copy the text exactly."},
		Activity: func(p EditParams) string { return "Editing " + displayPath(p.Path) },
		Execute:  c.edit,
	})
}

func displayPath(p string) string {
	if strings.TrimSpace(p) == "" {
		return "~"
	}
	return textclip.Runes(p, 80)
}

func (c *Category) list(ctx context.Context, p ListParams) (tool.Result, error) {
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tool.Result{}, err
	}
	defer h.close()
	depth := max(p.Depth, 1)
	fi, err := h.root.Stat(rel)
	if err != nil {
		return tool.Result{}, fileError("list", p.Path, err)
	}
	switch {
	case fi.Mode().IsRegular():
		return tool.Result{}, tool.Errorf(tool.ToolError, "Cannot list %s: it is a file (%s). Read it with read_file.", displayPath(p.Path), textclip.ByteCount(fi.Size()))
	case !fi.IsDir():
		return tool.Result{}, tool.Errorf(tool.ToolError, "Cannot list %s: it is a %s, not a directory.", displayPath(p.Path), typeName(fi.Mode()))
	}
	l := &lister{ctx: ctx, h: h, depth: depth}
	if err := l.walk(rel, "", 1); err != nil {
		return tool.Result{}, fileError("list", p.Path, err)
	}
	text, entries, cut := l.b.String(), l.entries, l.cut
	if entries == 0 {
		text = "(empty directory)\n"
	}
	if cut {
		text += fmt.Sprintf("[stopped after %d entries; list a subdirectory or use a smaller depth]\n", maxListEntries)
	}
	text, clipped := clip(text, c.cfg.OutputBudget, "")
	return tool.Result{
		Content: text,
		Details: map[string]any{"path": rel, "entries": entries, "depth": depth, "truncated": cut || clipped},
	}, nil
}

// lister writes list_files' listing. It opens nothing but directories,
// with O_DIRECTORY, and reads at most the entries it may still show from
// each, so neither a FIFO nor a directory of millions of entries holds it.
type lister struct {
	ctx     context.Context
	h       *home
	depth   int
	b       strings.Builder
	entries int
	cut     bool
}

// walk lists the directory rel, shown with prefix, in name order, and its
// subdirectories down to the depth.
func (l *lister) walk(rel, prefix string, level int) error {
	f, err := l.h.openDir(rel)
	if err != nil {
		return err
	}
	ents, err := f.ReadDir(maxListEntries - l.entries + 1)
	_ = f.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	for _, d := range ents {
		if err := l.ctx.Err(); err != nil {
			return err
		}
		if l.entries >= maxListEntries {
			l.cut = true
			return nil
		}
		l.entries++
		name, raw := filepath.Join(rel, d.Name()), prefix+d.Name()
		shown := shownName(raw)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := l.h.root.Readlink(name)
			if err != nil {
				target = "?"
			} else {
				target = shownName(target)
			}
			fmt.Fprintf(&l.b, "%s -> %s\n", shown, target)
		case d.IsDir():
			fmt.Fprintf(&l.b, "%s\n", shownName(raw+"/"))
			if level >= l.depth {
				continue
			}
			if err := l.walk(name, raw+"/", level+1); err != nil {
				if l.ctx.Err() != nil {
					return err
				}
				fmt.Fprintf(&l.b, "%s  (unreadable: %v)\n", shownName(raw+"/"), errors.Unwrap(err))
			}
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				fmt.Fprintf(&l.b, "%s\n", shown)
				continue
			}
			fmt.Fprintf(&l.b, "%s  (%s)\n", shown, textclip.ByteCount(info.Size()))
		default:
			fmt.Fprintf(&l.b, "%s  (%s)\n", shown, typeName(d.Type()))
		}
	}
	return nil
}

// shownName is how the file tools show a path: as it is, unless it could
// be misread: a name that is not valid UTF-8, holds a control or other
// unprintable character (a newline would forge a line of the listing),
// begins or ends with white space, begins with a double quote, is "~"
// or begins with "~/" (which name the home), or holds
// "  (" or " -> " (which the listing uses) is shown as a Go double-quoted
// string (strconv.Quote: \n, \t, \xff for a byte that is not UTF-8,
// \u00a0 ...). Every file tool takes such a quoted path back and decodes
// it (home.rel), so every listed name can be read, written and edited.
func shownName(s string) string {
	if needsQuote(s) {
		return strconv.Quote(s)
	}
	return s
}

func needsQuote(s string) bool {
	if s == "" || !utf8.ValidString(s) || strings.HasPrefix(s, `"`) || strings.TrimSpace(s) != s || s == "~" || strings.HasPrefix(s, "~/") ||
		strings.Contains(s, "  (") || strings.Contains(s, " -> ") {
		return true
	}
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0
}

// binarySniff is how much of a file is looked at to tell binary from text.
const binarySniff = 8000

func (c *Category) read(ctx context.Context, p ReadParams) (tool.Result, error) {
	byLines := p.StartLine > 0 || p.EndLine > 0
	byBytes := p.Offset > 0 || p.Length > 0
	switch {
	case byLines && byBytes:
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "Give either a line range (start_line, end_line) or a byte range (offset, length), not both.")
	case p.EndLine > 0 && p.StartLine > p.EndLine:
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "end_line %d is before start_line %d.", p.EndLine, p.StartLine)
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tool.Result{}, err
	}
	defer h.close()
	f, fi, err := h.openFile("read", p.Path, rel, os.O_RDONLY, 0)
	if err != nil {
		return tool.Result{}, err
	}
	defer f.Close()
	sniff := make([]byte, binarySniff)
	n, err := io.ReadFull(f, sniff)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	if kind := media.Sniff(sniff[:n]); kind != "" && !byBytes {
		// An image or a PDF is read whole, for the model to see; the
		// bytes decide, whatever the name says.
		return c.readMedia(f, rel, fi, p, kind)
	}
	if bytes.IndexByte(sniff[:n], 0) >= 0 {
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"%s looks binary (%s; it contains NUL bytes), so it is not shown as text. Inspect it with run_command, e.g. `file %s` or `xxd -l 512 %s`.",
			p.Path, textclip.ByteCount(fi.Size()), shellQuote(rel), shellQuote(rel))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	limit := c.cfg.OutputBudget - noteReserve
	if byBytes {
		return c.readBytes(f, rel, fi, p, limit)
	}
	return c.readLines(ctx, f, rel, fi, p, limit)
}

// readMedia returns an image or PDF file as media (the runtime fits it to
// the media budget: an image is scaled down, a PDF that does not fit is
// replaced by a note naming the path), with a line saying what it is.
func (c *Category) readMedia(f *os.File, rel string, fi os.FileInfo, p ReadParams, kind string) (tool.Result, error) {
	what := "a PDF file"
	if media.IsImage(kind) {
		what = "an image (" + kind + ")"
	}
	if fi.Size() > c.cfg.MaxFileBytes {
		return tool.Result{}, tool.Errorf(tool.ToolError, "%s is %s of %s, larger than the %s read_file reads whole. Make a smaller copy with run_command first.",
			p.Path, what, textclip.ByteCount(fi.Size()), textclip.ByteCount(c.cfg.MaxFileBytes))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	data, err := io.ReadAll(io.LimitReader(f, c.cfg.MaxFileBytes+1))
	if err != nil {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	if int64(len(data)) > c.cfg.MaxFileBytes {
		return tool.Result{}, tool.Errorf(tool.ToolError, "%s grew past the %s read_file reads whole while it was read.", p.Path, textclip.ByteCount(c.cfg.MaxFileBytes))
	}
	details := map[string]any{"path": rel, "size": len(data), "media_type": kind}
	text := fmt.Sprintf("%s: %s, %s.", rel, what, textclip.ByteCount(int64(len(data))))
	if info, err := media.Probe(data); err == nil {
		details["width"], details["height"] = info.Width, info.Height
		text = fmt.Sprintf("%s: %s, %d×%d pixels, %s.", rel, what, info.Width, info.Height, textclip.ByteCount(int64(len(data))))
	}
	return tool.Result{
		Content: text,
		Media:   []tool.Media{{MIMEType: kind, Data: data, Filename: rel, Source: rel + " in your home"}},
		Details: details,
	}, nil
}

func (c *Category) readBytes(f *os.File, rel string, fi os.FileInfo, p ReadParams, limit int) (tool.Result, error) {
	size := fi.Size()
	if p.Offset >= size && size > 0 || p.Offset > 0 && size == 0 {
		return tool.Result{}, tool.Errorf(tool.ToolError, "Offset %d is at or past the end of %s (%s).", p.Offset, p.Path, textclip.ByteCount(size))
	}
	want := int64(limit)
	if p.Length > 0 && p.Length < want {
		want = p.Length
	}
	buf := make([]byte, want)
	n, err := f.ReadAt(buf, p.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	buf = buf[:n]
	end := p.Offset + int64(n)
	var b strings.Builder
	fmt.Fprintf(&b, "%s: bytes %d–%d of %d\n", rel, p.Offset, end, size)
	b.WriteString(strings.ToValidUTF8(string(buf), "\uFFFD"))
	truncated := p.Length > int64(n) && end < size || p.Length == 0 && end < size
	if truncated {
		fmt.Fprintf(&b, "\n[%s more; read on with offset=%d]\n", textclip.ByteCount(size-end), end)
	}
	return tool.Result{
		Content: b.String(),
		Details: map[string]any{"path": rel, "size": size, "offset": p.Offset, "bytes": n, "truncated": truncated},
	}, nil
}

func (c *Category) readLines(ctx context.Context, f *os.File, rel string, fi os.FileInfo, p ReadParams, limit int) (tool.Result, error) {
	first := max(p.StartLine, 1)
	br := bufio.NewReaderSize(f, 64<<10)
	var out strings.Builder
	line, pos := 1, int64(0) // the line being read and its byte position
	last := 0                // the last line shown in full
	eof, cutAt, endsNL := false, int64(-1), false
	partial := false // part of the current line is in out
	for {
		if err := ctx.Err(); err != nil {
			return tool.Result{}, err
		}
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if line >= first {
				if out.Len()+len(chunk) > limit {
					if last >= first && !partial {
						// Whole lines only, unless a single line is
						// over the budget.
						break
					}
					part := textclip.Head(string(chunk), limit-out.Len())
					out.WriteString(part)
					cutAt = pos + int64(len(part))
					break
				}
				out.Write(chunk)
			}
			pos += int64(len(chunk))
			endsNL = chunk[len(chunk)-1] == '\n'
			partial = line >= first && !endsNL
			if endsNL {
				if line >= first {
					last = line
				}
				line++
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if errors.Is(err, io.EOF) {
			eof = true
			if len(chunk) > 0 && chunk[len(chunk)-1] != '\n' && line >= first {
				last = line // a last line without a newline
			}
			break
		}
		if err != nil {
			return tool.Result{}, fileError("read", p.Path, err)
		}
		if p.EndLine > 0 && line > p.EndLine {
			break
		}
	}
	total := 0 // known only when the end was reached
	switch {
	case eof && pos == 0:
	case eof && endsNL:
		total = line - 1
	case eof:
		total = line
	}
	var b strings.Builder
	switch {
	case fi.Size() == 0:
		fmt.Fprintf(&b, "%s: empty file\n", rel)
	case first > last && cutAt < 0:
		if eof {
			return tool.Result{}, tool.Errorf(tool.ToolError, "%s has %d lines; start_line %d is past the end.", p.Path, total, first)
		}
	case eof && cutAt < 0:
		fmt.Fprintf(&b, "%s: lines %d–%d of %d (%s)\n", rel, first, last, total, textclip.ByteCount(fi.Size()))
	default:
		fmt.Fprintf(&b, "%s: lines %d–%d (%s in all)\n", rel, first, max(last, first), textclip.ByteCount(fi.Size()))
	}
	b.WriteString(strings.ToValidUTF8(out.String(), "\uFFFD"))
	truncated := false
	switch {
	case cutAt >= 0:
		truncated = true
		fmt.Fprintf(&b, "\n[cut at the %s output budget inside line %d; read on with start_line=%d, or with offset=%d for bytes]\n",
			textclip.ByteCount(int64(c.cfg.OutputBudget)), last+1, last+1, cutAt)
	case !eof && (p.EndLine == 0 || last < p.EndLine):
		truncated = true
		fmt.Fprintf(&b, "\n[more lines follow; read on with start_line=%d]\n", last+1)
	case !eof:
		fmt.Fprintf(&b, "\n[the file goes on after line %d]\n", last)
	}
	return tool.Result{
		Content: b.String(),
		Details: map[string]any{"path": rel, "size": fi.Size(), "start_line": first, "end_line": last, "lines": total, "truncated": truncated},
	}, nil
}

func (c *Category) write(ctx context.Context, p WriteParams) (tool.Result, error) {
	if int64(len(p.Content)) > c.cfg.MaxFileBytes {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "The content is %s, over the %s limit of write_file.", textclip.ByteCount(int64(len(p.Content))), textclip.ByteCount(c.cfg.MaxFileBytes))
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tool.Result{}, err
	}
	defer h.close()
	if rel == "." {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "The path names your home directory itself; name a file in it.")
	}
	if dir := filepath.Dir(rel); dir != "." {
		if err := h.mkdirAll(dir, 0o755); err != nil {
			return tool.Result{}, fileError("create the directory for", p.Path, err)
		}
	}
	size, created, err := c.writeContent(h, p, rel)
	if err != nil {
		return tool.Result{}, err
	}
	verb := "Wrote"
	if p.Append {
		verb = "Appended"
	}
	what := "replaced"
	switch {
	case created:
		what = "created"
	case p.Append:
		what = "appended to"
	}
	return tool.Result{
		Content: fmt.Sprintf("%s %s (%d lines) to %s (%s; now %s).", verb, textclip.ByteCount(int64(len(p.Content))), lineCount(p.Content), rel, what, textclip.ByteCount(size)),
		Details: map[string]any{"path": rel, "bytes": len(p.Content), "size": size, "created": created, "append": p.Append},
	}, nil
}

// writeContent writes p's content to rel: a replacement atomically (see
// home.replace), an append in place, cut back to its old size when it
// fails. Either way a failure leaves the old content whole. It returns
// the file's new size and whether it was created.
func (c *Category) writeContent(h *home, p WriteParams, rel string) (int64, bool, error) {
	_, statErr := h.root.Lstat(rel)
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return 0, false, fileError("write", p.Path, statErr)
	}
	created := statErr != nil
	if created {
		if err := h.quota.admit(h, int64(len(p.Content)), 1); err != nil {
			return 0, false, err
		}
		if p.Append {
			// Nothing to keep: an append to a new file is a write.
			p.Append = false
		}
		if err := h.replace(rel, p.Content, 0o644); err != nil {
			h.quota.release(h, int64(len(p.Content)), 1)
			return 0, false, fileError("write", p.Path, err)
		}
		return int64(len(p.Content)), true, nil
	}
	flag := os.O_RDONLY
	if p.Append {
		flag = os.O_WRONLY | os.O_APPEND
	}
	f, fi, err := h.openFile("write", p.Path, rel, flag, 0)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	old := fi.Size()
	if p.Append {
		if err := h.quota.admit(h, int64(len(p.Content)), 0); err != nil {
			return 0, false, err
		}
		_, err := f.WriteString(p.Content)
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			// Back to what it was: the old content whole, no part of
			// the new.
			_ = f.Truncate(old)
			h.quota.release(h, int64(len(p.Content)), 0)
			return 0, false, fileError("write", p.Path, err)
		}
		return old + int64(len(p.Content)), false, nil
	}
	to, err := h.target(rel, f)
	if err != nil {
		return 0, false, fileError("write", p.Path, err)
	}
	if err := h.quota.admit(h, int64(len(p.Content))-old, 0); err != nil {
		return 0, false, err
	}
	if err := h.replace(to, p.Content, keptMode(fi.Mode())); err != nil {
		h.quota.release(h, int64(len(p.Content))-old, 0)
		return 0, false, fileError("write", p.Path, err)
	}
	return int64(len(p.Content)), false, nil
}

func lineCount(s string) int {
	if s == "" {
		return 0
	}
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// maxListedOccurrences bounds the line numbers an ambiguity error names.
const maxListedOccurrences = 10

func (c *Category) edit(ctx context.Context, p EditParams) (tool.Result, error) {
	if p.OldText == p.NewText {
		return tool.Result{}, tool.Errorf(tool.InvalidArguments, "old_text and new_text are the same: there is nothing to change.")
	}
	h, rel, err := c.open(ctx, p.Path)
	if err != nil {
		return tool.Result{}, err
	}
	defer h.close()
	f, fi, err := h.openFile("edit", p.Path, rel, os.O_RDONLY, 0)
	if err != nil {
		return tool.Result{}, err
	}
	defer f.Close()
	tooBig := func(n int64) error {
		return tool.Errorf(tool.ToolError, "Cannot edit %s: it is %s, over the %s limit of edit_file. Use run_command (sed, a script) instead.", p.Path, textclip.ByteCount(n), textclip.ByteCount(c.cfg.MaxFileBytes))
	}
	if fi.Size() > c.cfg.MaxFileBytes {
		return tool.Result{}, tooBig(fi.Size())
	}
	// The limit again while reading: the file may have grown since fstat.
	data, err := io.ReadAll(io.LimitReader(f, c.cfg.MaxFileBytes+1))
	if err != nil {
		return tool.Result{}, fileError("read", p.Path, err)
	}
	if int64(len(data)) > c.cfg.MaxFileBytes {
		return tool.Result{}, tooBig(int64(len(data)))
	}
	text := string(data)
	data = nil
	count := strings.Count(text, p.OldText) // what strings.ReplaceAll replaces
	switch {
	case count == 0:
		return tool.Result{}, tool.Errorf(tool.ToolError, "old_text was not found in %s; nothing was changed. %s", p.Path, missHint(text, p.OldText))
	case count > 1 && !p.ReplaceAll:
		return tool.Result{}, tool.Errorf(tool.ToolError,
			"old_text occurs %d times in %s (at lines %s); nothing was changed. Include more of the surrounding text so that it occurs once, or set replace_all to replace every occurrence.",
			count, p.Path, lineList(text, occurrences(text, p.OldText, maxListedOccurrences+1)))
	}
	// The result's size before the result: replace_all of a short text by
	// a long one in a large file must not allocate gigabytes to find out.
	size, ok := editedSize(len(text), count, len(p.OldText), len(p.NewText))
	if !ok || size > c.cfg.MaxFileBytes {
		shown := "more than 8 EiB"
		if ok {
			shown = textclip.ByteCount(size)
		}
		return tool.Result{}, tool.Errorf(tool.ToolError, "The edit (%d replacements) would make %s %s, over the %s limit of edit_file; nothing was changed.", count, p.Path, shown, textclip.ByteCount(c.cfg.MaxFileBytes))
	}
	at := occurrences(text, p.OldText, maxListedOccurrences+1)
	var updated string
	if p.ReplaceAll {
		updated = strings.ReplaceAll(text, p.OldText, p.NewText)
	} else {
		updated = text[:at[0]] + p.NewText + text[at[0]+len(p.OldText):]
	}
	// A new file renamed over the old one: a full disk leaves the old
	// content whole.
	to, err := h.target(rel, f)
	if err != nil {
		return tool.Result{}, fileError("write", p.Path, err)
	}
	if err := h.quota.admit(h, int64(len(updated)-len(text)), 0); err != nil {
		return tool.Result{}, err
	}
	if err := h.replace(to, updated, keptMode(fi.Mode())); err != nil {
		h.quota.release(h, int64(len(updated)-len(text)), 0)
		return tool.Result{}, fileError("write", p.Path, err)
	}
	lines := make([]int, 0, min(len(at), maxListedOccurrences))
	for _, i := range at[:min(len(at), maxListedOccurrences)] {
		lines = append(lines, strings.Count(text[:i], "\n")+1)
	}
	noun := "occurrence"
	if count > 1 {
		noun = "occurrences"
	}
	return tool.Result{
		Content: fmt.Sprintf("Replaced %d %s in %s (at lines %s); the file is now %s.", count, noun, rel, lineList(text, at), textclip.ByteCount(int64(len(updated)))),
		Details: map[string]any{"path": rel, "replacements": count, "lines": lines, "bytes_before": len(text), "bytes_after": len(updated)},
	}, nil
}

// editedSize is the size of a text of n bytes after count replacements of
// oldLen bytes by newLen bytes; false when it does not fit in an int64.
func editedSize(n, count, oldLen, newLen int) (int64, bool) {
	delta := int64(newLen) - int64(oldLen)
	if delta > 0 && int64(count) > (math.MaxInt64-int64(n))/delta {
		return 0, false
	}
	return int64(n) + int64(count)*delta, true
}

// occurrences are the byte offsets of the first (at most limit)
// non-overlapping occurrences of old in text, as strings.ReplaceAll would
// replace them.
func occurrences(text, old string, limit int) []int {
	var at []int
	for i := 0; len(at) < limit; {
		j := strings.Index(text[i:], old)
		if j < 0 {
			break
		}
		at = append(at, i+j)
		i += j + len(old)
	}
	return at
}

func lineList(text string, at []int) string {
	var parts []string
	for k, i := range at {
		if k == maxListedOccurrences {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprint(strings.Count(text[:i], "\n")+1))
	}
	return strings.Join(parts, ", ")
}

// missHint guesses why old was not found, for the model's next try.
func missHint(text, old string) string {
	switch {
	case strings.Contains(text, "\r\n") && strings.Contains(strings.ReplaceAll(text, "\r\n", "\n"), old):
		return "The file has CRLF line endings (\\r\\n); old_text must have them too."
	case strings.TrimSpace(old) != old && strings.Contains(text, strings.TrimSpace(old)):
		return "It occurs without the leading or trailing whitespace you gave; copy the text exactly."
	case strings.Contains(collapseSpace(text), collapseSpace(old)):
		return "It occurs with different spacing or indentation; read the file and copy the text exactly."
	}
	return "Read the file (read_file) and copy the text to replace exactly, whitespace and line breaks included."
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
