package brain

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// corpusOf indexes pages given as title → body; each page is a minute
// older than the one before, so ties are decided by the order given.
func corpusOf(pages [][2]string) *corpus {
	c := newCorpus()
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, p := range pages {
		c.put(newDoc(p[0], &Page{Title: p[0], Body: p[1], UpdatedAt: base.Add(-time.Duration(i) * time.Minute)}))
	}
	return c
}

var noise = strings.Repeat("The quarterly planning meeting covered budgets, hiring, office moves and the roadmap for next year. ", 12)

var testPages = [][2]string{
	{"Release process", "How we ship a release: tag the commit, build the artifacts,\nwrite the release notes from merged pull requests,\nthen publish to the registry."},
	{"Coffee machine", "The coffee machine on floor 3 needs descaling every month.\nUse the blue descaler, never vinegar."},
	{"Deploy checklist", "Before a deploy: run the migrations, check the dashboards, tell the on-call.\nRollback: run the deploy tool with --previous."},
	{"Team birthdays", "Ana: March 3.\nBo: July 9.\nChen: December 1."},
	{"東京オフィス", "東京オフィスの住所は千代田区です。\n会議室は三つあります。"},
	{"Release notes style", "Release notes are written in the past tense,\none line per change, grouped by component."},
	{"Planning minutes", noise + "A release was mentioned once. " + noise},
	{"大阪オフィス", "大阪オフィスは梅田にあります。\n会議は毎週月曜日です。"},
}

func titles(hits []hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.doc.title)
	}
	return out
}

// TestRanking checks BM25 on a small corpus whose answers are known.
func TestRanking(t *testing.T) {
	c := corpusOf(testPages)
	tests := []struct {
		query string
		want  []string // the ranking's head, in order
		none  bool
	}{
		// Both terms in the title and the body beat a page with one of
		// them in its title; a long page that mentions the word once,
		// deep in noise, comes last.
		{query: "release notes", want: []string{"Release notes style", "Release process", "Planning minutes"}},
		{query: "release", want: []string{"Release process", "Release notes style", "Planning minutes"}},
		{query: "descaling the coffee machine", want: []string{"Coffee machine"}},
		{query: "how do I roll back a deploy? rollback", want: []string{"Deploy checklist"}},
		// Plurals fold: "birthday" finds "birthdays", "note" finds "notes".
		{query: "birthday", want: []string{"Team birthdays"}},
		{query: "NOTE", want: []string{"Release notes style", "Release process"}},
		// CJK without spaces: pairs of characters, single characters too.
		{query: "会議室", want: []string{"東京オフィス"}},
		{query: "千代田区の住所", want: []string{"東京オフィス"}},
		{query: "会議", want: []string{"大阪オフィス", "東京オフィス"}},
		{query: "梅", want: []string{"大阪オフィス"}},
		{query: "kubernetes", none: true},
	}
	for _, tt := range tests {
		got := titles(c.search(queryTerms(tt.query), DefaultK1, DefaultB))
		if tt.none {
			if len(got) != 0 {
				t.Errorf("%q: got %v, want nothing", tt.query, got)
			}
			continue
		}
		if len(got) < len(tt.want) || !slices.Equal(got[:len(tt.want)], tt.want) {
			t.Errorf("%q: ranking %v, want it to start %v", tt.query, got, tt.want)
		}
	}
}

// TestBM25Arithmetic pins the scores of a two-page corpus against the
// formula computed by hand.
func TestBM25Arithmetic(t *testing.T) {
	c := corpusOf([][2]string{{"a", "x y"}, {"b", "z z z z"}})
	// Page a: title "a" (weight 2) + "x", "y" → length 4; page b: 2 + 4 = 6.
	// avgdl 5. idf(x) = ln(1 + (2-1+0.5)/(1+0.5)) = ln 2.
	hits := c.search([]string{"x"}, 1.2, 0.75)
	if len(hits) != 1 {
		t.Fatalf("hits %v", titles(hits))
	}
	want := 0.6931471805599453 * 1 * 2.2 / (1 + 1.2*(1-0.75+0.75*4.0/5.0))
	if got := hits[0].score; fmt.Sprintf("%.12f", got) != fmt.Sprintf("%.12f", want) {
		t.Errorf("score %v, want %v", got, want)
	}
}

func TestTokenize(t *testing.T) {
	var got []string
	tokenize("Hello, World's 3 Queries! 東京都 café x", true, func(term string, start, end int) {
		got = append(got, fmt.Sprintf("%s@%d", term, start))
	})
	want := []string{"hello@0", "world@7", "s@13", "3@15", "query@17", "東@26", "京@29", "都@32", "東京@26", "京都@29", "café@36", "x@42"}
	if !slices.Equal(got, want) {
		t.Errorf("tokens\n got %v\nwant %v", got, want)
	}
	if q := queryTerms("東京 東京 tokyo"); !slices.Equal(q, []string{"東京", "tokyo"}) {
		t.Errorf("query terms %v", q)
	}
	if q := queryTerms("京"); !slices.Equal(q, []string{"京"}) {
		t.Errorf("single character query %v", q)
	}
}

func TestSnippets(t *testing.T) {
	c := corpusOf(testPages)
	d := c.docs["Release process"]
	got := c.snippets(d, queryTerms("release notes"), 2, 200)
	want := []Snippet{
		{Line: 1, Text: "How we ship a release: tag the commit, build the artifacts,"},
		{Line: 2, Text: "write the release notes from merged pull requests,"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("snippets %+v", got)
	}
	// A long line is cut around its first match.
	long := strings.Repeat("lorem ipsum ", 50) + "the needle is here " + strings.Repeat("dolor sit ", 50)
	c.put(newDoc("long", &Page{Title: "long", Body: long}))
	s := c.snippets(c.docs["long"], queryTerms("needle"), 2, 80)
	if len(s) != 1 || !strings.HasPrefix(s[0].Text, "…") || !strings.HasSuffix(s[0].Text, "…") || !strings.Contains(s[0].Text, "needle") || len(s[0].Text) > 90 {
		t.Errorf("long line snippet %+v", s)
	}
	// A title-only match shows the page's first line.
	s = c.snippets(c.docs["Team birthdays"], queryTerms("team"), 2, 200)
	if len(s) != 1 || s[0] != (Snippet{Line: 1, Text: "Ana: March 3."}) {
		t.Errorf("title-only snippet %+v", s)
	}
}

func TestCorpusRemove(t *testing.T) {
	c := corpusOf(testPages)
	n, total := len(c.df), c.totalLen
	c.put(newDoc("extra", &Page{Title: "extra", Body: "zebra quagga"}))
	c.remove("extra")
	if len(c.df) != n || c.totalLen != total {
		t.Errorf("df %d→%d, total %d→%d after put and remove", n, len(c.df), total, c.totalLen)
	}
	// Replacing a page keeps the statistics of the new version only.
	c.put(newDoc("Coffee machine", &Page{Title: "Coffee machine", Body: "tea"}))
	if hits := c.search(queryTerms("descaler"), DefaultK1, DefaultB); len(hits) != 0 {
		t.Errorf("replaced page still found: %v", titles(hits))
	}
}

func TestSplitLines(t *testing.T) {
	if got := splitLines("a\nb\n"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("%q", got)
	}
	if got := splitLines("a\r\n\nb"); !slices.Equal(got, []string{"a", "", "b"}) {
		t.Errorf("%q", got)
	}
	long := strings.Repeat("é", MaxLineBytes) // 2 bytes each
	got := splitLines(long)
	if len(got) != 2 || len(got[0]) != MaxLineBytes || strings.Join(got, "") != long {
		t.Errorf("long line split into %d parts", len(got))
	}
}

func FuzzTokenize(f *testing.F) {
	for _, p := range testPages {
		f.Add(p[1])
	}
	f.Fuzz(func(t *testing.T, s string) {
		tokenize(s, true, func(term string, start, end int) {
			if term == "" || start < 0 || end > len(s) || start >= end {
				t.Fatalf("term %q at %d-%d of %d bytes", term, start, end, len(s))
			}
		})
		for _, l := range splitLines(s) {
			if len(l) > MaxLineBytes {
				t.Fatalf("line of %d bytes", len(l))
			}
		}
	})
}
