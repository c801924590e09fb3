package web

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"
)

// A page nested far deeper than any real one converts without
// exhausting the stack, and keeps its text.
func TestDeeplyNestedPage(t *testing.T) {
	const depth = 200_000
	page := "<html><head><title>Deep</title><style>.x{}</style></head><body><script>SCRIPT</script>" +
		strings.Repeat("<div>", depth) + "deep text" + strings.Repeat("</div>", depth) + "</body></html>"
	title, md, err := toMarkdown(context.Background(), newMarkdown(), page, "https://example.com/")
	if err != nil {
		t.Fatal(err)
	}
	if title != "Deep" || !strings.Contains(md, "deep text") || strings.Contains(md, "SCRIPT") || strings.Contains(md, ".x{}") {
		t.Errorf("title %q, text %.200q", title, md)
	}
}

func TestMainContent(t *testing.T) {
	tests := []struct {
		name, page   string
		want, absent []string
	}{
		{"main wins", `<body><div>side</div><main><p>` + strings.Repeat("main text ", 20) + `</p></main></body>`, []string{"main text"}, []string{"side"}},
		{"one article", `<body><div>chrome</div><article>` + strings.Repeat("story ", 20) + `</article></body>`, []string{"story"}, []string{"chrome"}},
		{"two articles: the body", `<body><p>intro</p><article>one</article><article>two</article></body>`, []string{"intro", "one", "two"}, nil},
		{"a tiny main: the body", `<body><main>x</main><div>` + strings.Repeat("real content ", 20) + `</div></body>`, []string{"real content", "x"}, nil},
		{"role=main", `<body><div>menu</div><div role="main">` + strings.Repeat("content ", 20) + `</div></body>`, []string{"content"}, []string{"menu"}},
		{"no body", `just text`, []string{"just text"}, nil},
	}
	for _, tt := range tests {
		_, md, err := toMarkdown(context.Background(), newMarkdown(), tt.page, "https://example.com/")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tt.want {
			if !strings.Contains(md, w) {
				t.Errorf("%s: lacks %q: %q", tt.name, w, md)
			}
		}
		for _, a := range tt.absent {
			if strings.Contains(md, a) {
				t.Errorf("%s: has %q: %q", tt.name, a, md)
			}
		}
	}
}

func FuzzToMarkdown(f *testing.F) {
	f.Add("<html><head><title>t</title><script>x</script></head><body><main><p>hi <a href='/x'>l</a></p></main></body></html>")
	f.Add("<table><tr><td><div><ul><li><pre>code</pre></li></ul></div></td></tr></table>")
	f.Add(strings.Repeat("<b><i>", 300) + "x")
	f.Add("<img src='data:image/png;base64,AAAA'><p hidden>h</p><svg><text>s</text></svg>")
	conv := newMarkdown()
	f.Fuzz(func(t *testing.T, page string) {
		title, md, err := toMarkdown(context.Background(), conv, page, "https://example.com/a/b")
		if err != nil {
			return
		}
		if !utf8.ValidString(title) && utf8.ValidString(page) {
			t.Errorf("title is not UTF-8: %q", title)
		}
		_ = md
	})
}

func FuzzParseSearXNG(f *testing.F) {
	f.Add([]byte(`{"results":[{"title":"a","url":"https://a","content":"c"},{"url":""},{"title":"a","url":"https://a"}]}`), 3)
	f.Add([]byte(`{"results":null}`), 1)
	f.Add([]byte(`[]`), 5)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		n = n%30 + 1
		if n <= 0 {
			n = 1
		}
		rs, err := parseSearXNG(data, n)
		if err != nil {
			return
		}
		if len(rs) > n {
			t.Errorf("%d results for n=%d", len(rs), n)
		}
		seen := map[string]bool{}
		for _, r := range rs {
			if r.URL == "" || seen[r.URL] {
				t.Errorf("empty or repeated URL in %v", rs)
			}
			seen[r.URL] = true
		}
	})
}
