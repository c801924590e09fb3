package brain

import (
	"math"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// BM25 parameters.
const (
	DefaultK1 = 1.2
	DefaultB  = 0.75
	// titleWeight is how many times a title term counts against a body
	// term (a BM25F with two fields and one length normalisation).
	titleWeight = 2
	// maxTermRunes drops longer "words" (base64 blobs, hashes).
	maxTermRunes = 64
)

// cjk reports whether r is written without spaces between words.
func cjk(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul) || r == 'ー'
}

func wordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// tokenize calls emit for every term of s with its byte range. Words are
// maximal runs of letters, digits and marks, lower-cased, English plurals
// folded to the singular. A run of CJK
// characters gives its overlapping pairs; with unigrams it also gives
// each character (pages index both, so that a one-character query finds
// them; a query of two or more characters uses the pairs only).
func tokenize(s string, unigrams bool, emit func(term string, start, end int)) {
	type cr struct {
		r          rune
		start, end int
	}
	var run []cr
	flushCJK := func() {
		if len(run) == 1 || unigrams {
			for _, c := range run {
				emit(string(c.r), c.start, c.end)
			}
		}
		for i := 0; i+1 < len(run); i++ {
			emit(string([]rune{run[i].r, run[i+1].r}), run[i].start, run[i+1].end)
		}
		run = run[:0]
	}
	var word strings.Builder
	wordStart, wordRunes := -1, 0
	flushWord := func(end int) {
		if wordStart >= 0 && wordRunes <= maxTermRunes {
			emit(fold(word.String()), wordStart, end)
		}
		word.Reset()
		wordStart, wordRunes = -1, 0
	}
	for i, r := range s {
		size := utf8.RuneLen(r)
		if size < 0 {
			size = 1
		}
		switch {
		case cjk(r):
			flushWord(i)
			run = append(run, cr{r, i, i + size})
		case wordRune(r):
			if len(run) > 0 {
				flushCJK()
			}
			if wordStart < 0 {
				wordStart = i
			}
			word.WriteRune(unicode.ToLower(r))
			wordRunes++
		default:
			flushWord(i)
			if len(run) > 0 {
				flushCJK()
			}
		}
	}
	flushWord(len(s))
	if len(run) > 0 {
		flushCJK()
	}
}

// fold maps an English plural to its singular ("notes" → "note",
// "queries" → "query"), so that either finds the other. It is applied to
// pages and queries alike; a rare wrong fold ("news" → "new") merges two
// words, it never loses one.
func fold(w string) string {
	n := len(w)
	if n <= 3 || w[n-1] != 's' {
		return w
	}
	for i := 0; i < n; i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return w
		}
	}
	switch {
	case strings.HasSuffix(w, "ies") && n > 4:
		return w[:n-3] + "y"
	case strings.HasSuffix(w, "ss"), strings.HasSuffix(w, "us"), strings.HasSuffix(w, "is"):
		return w
	}
	return w[:n-1]
}

// queryTerms are the distinct terms of a query, in order of appearance.
func queryTerms(q string) []string {
	seen := map[string]bool{}
	var out []string
	tokenize(q, false, func(t string, _, _ int) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	})
	return out
}

// doc is one page as the index holds it.
type doc struct {
	key     string
	title   string
	body    string
	updated time.Time
	// tf counts each term, a title occurrence as titleWeight.
	tf     map[string]int
	length int
	size   int
}

func newDoc(key string, p *Page) *doc {
	d := &doc{key: key, title: p.Title, body: p.Body, updated: p.UpdatedAt, tf: map[string]int{}, size: len(key) + len(p.Title) + len(p.Body)}
	tokenize(p.Title, true, func(t string, _, _ int) { d.tf[t] += titleWeight; d.length += titleWeight })
	tokenize(p.Body, true, func(t string, _, _ int) { d.tf[t]++; d.length++ })
	d.size += 48 * len(d.tf)
	return d
}

// corpus is the pages of one agent with the statistics BM25 needs. It is
// not safe for concurrent use (see index).
type corpus struct {
	docs     map[string]*doc
	df       map[string]int
	totalLen int
	bytes    int
}

func newCorpus() *corpus { return &corpus{docs: map[string]*doc{}, df: map[string]int{}} }

func (c *corpus) put(d *doc) {
	c.remove(d.key)
	c.docs[d.key] = d
	for t := range d.tf {
		c.df[t]++
	}
	c.totalLen += d.length
	c.bytes += d.size
}

func (c *corpus) remove(key string) {
	d, ok := c.docs[key]
	if !ok {
		return
	}
	delete(c.docs, key)
	for t := range d.tf {
		if c.df[t]--; c.df[t] <= 0 {
			delete(c.df, t)
		}
	}
	c.totalLen -= d.length
	c.bytes -= d.size
}

// hit is one ranked page.
type hit struct {
	doc   *doc
	score float64
}

// idf is BM25's inverse document frequency, never negative.
func (c *corpus) idf(term string) float64 {
	n, df := float64(len(c.docs)), float64(c.df[term])
	return math.Log(1 + (n-df+0.5)/(df+0.5))
}

// search ranks the pages that contain at least one query term by BM25,
// best first; ties go to the page updated last, then by title.
func (c *corpus) search(terms []string, k1, b float64) []hit {
	if len(c.docs) == 0 || len(terms) == 0 {
		return nil
	}
	avg := float64(c.totalLen) / float64(len(c.docs))
	if avg == 0 {
		avg = 1
	}
	idf := make([]float64, len(terms))
	for i, t := range terms {
		idf[i] = c.idf(t)
	}
	var hits []hit
	for _, d := range c.docs {
		score := 0.0
		for i, t := range terms {
			tf := float64(d.tf[t])
			if tf == 0 {
				continue
			}
			score += idf[i] * tf * (k1 + 1) / (tf + k1*(1-b+b*float64(d.length)/avg))
		}
		if score > 0 {
			hits = append(hits, hit{doc: d, score: score})
		}
	}
	sort.Slice(hits, func(i, j int) bool {
		a, z := hits[i], hits[j]
		if a.score != z.score {
			return a.score > z.score
		}
		if !a.doc.updated.Equal(z.doc.updated) {
			return a.doc.updated.After(z.doc.updated)
		}
		return a.doc.title < z.doc.title
	})
	return hits
}

// Snippet is a matching passage of a page.
type Snippet struct {
	// Line is the passage's line number (as get_page counts them).
	Line int    `json:"line"`
	Text string `json:"text"`
}

// snippets picks up to n lines of the body that match the most (by the
// query terms' IDF), in page order, each cut to about width bytes around
// its first match. A page that matched only by its title gets its first
// non-empty line.
func (c *corpus) snippets(d *doc, terms []string, n, width int) []Snippet {
	want := map[string]float64{}
	for _, t := range terms {
		want[t] = c.idf(t)
	}
	type scored struct {
		line  int
		score float64
		first int
		text  string
	}
	var best []scored
	for i, line := range splitLines(d.body) {
		seen := map[string]bool{}
		s := scored{line: i + 1, first: -1, text: line}
		tokenize(line, true, func(t string, start, _ int) {
			w, ok := want[t]
			if !ok {
				return
			}
			if s.first < 0 {
				s.first = start
			}
			if !seen[t] {
				seen[t] = true
				s.score += w
			}
		})
		if s.score > 0 {
			best = append(best, s)
		}
	}
	sort.SliceStable(best, func(i, j int) bool { return best[i].score > best[j].score })
	if len(best) > n {
		best = best[:n]
	}
	sort.Slice(best, func(i, j int) bool { return best[i].line < best[j].line })
	out := make([]Snippet, 0, len(best))
	for _, s := range best {
		out = append(out, Snippet{Line: s.line, Text: excerpt(s.text, s.first, width)})
	}
	if len(out) == 0 {
		for i, line := range splitLines(d.body) {
			if strings.TrimSpace(line) != "" {
				out = append(out, Snippet{Line: i + 1, Text: excerpt(line, 0, width)})
				break
			}
		}
	}
	return out
}

// excerpt cuts line to about width bytes, starting a little before at,
// on rune boundaries, marking cuts with an ellipsis.
func excerpt(line string, at, width int) string {
	line = strings.TrimRight(line, " \t\r")
	if len(line) <= width {
		return strings.TrimSpace(line)
	}
	start := max(0, at-width/4)
	for start > 0 && !utf8.RuneStart(line[start]) {
		start--
	}
	end := min(len(line), start+width)
	for end < len(line) && !utf8.RuneStart(line[end]) {
		end--
	}
	s := strings.TrimSpace(line[start:end])
	if start > 0 {
		s = "…" + s
	}
	if end < len(line) {
		s += "…"
	}
	return s
}
