package web

import (
	"context"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// removed are the elements that are not the readable part of a page:
// the converter's base plugin already drops script, style, noscript,
// iframe, head and inputs; these go too.
var removed = []string{"nav", "footer", "aside", "form", "svg", "canvas", "template", "button", "select", "option", "object", "embed", "dialog", "menu"}

// newMarkdown builds the HTML to Markdown converter once; it is safe for
// concurrent use.
func newMarkdown() *converter.Converter {
	conv := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	for _, tag := range removed {
		conv.Register.TagType(tag, converter.TagTypeRemove, converter.PriorityStandard)
	}
	return conv
}

// toMarkdown turns an HTML page into its title and readable Markdown:
// the page's main content (its <main>, or its only <article>, when that
// holds most of the text, otherwise the body) without scripts, styles,
// navigation, forms, hidden elements or inline data images. Relative
// links are made absolute against base.
func toMarkdown(ctx context.Context, conv *converter.Converter, page, baseURL string) (title, md string, err error) {
	// The parser refuses pages nested more than 512 elements deep (which
	// also bounds the converter's recursion); their text is still read.
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		title, text := plainText(page)
		return title, text, nil
	}
	title = oneLine(textOf(find(doc, atom.Title)))
	prune(doc)
	out, err := conv.ConvertNode(mainContent(doc), converter.WithDomain(baseURL), converter.WithContext(ctx))
	if err != nil {
		return title, "", err
	}
	return title, strings.TrimSpace(string(out)) + "\n", nil
}

// each visits n and its descendants in document order without
// recursing; visit returns false to skip a node's children.
func each(n *html.Node, visit func(n *html.Node, depth int) bool) {
	type item struct {
		n     *html.Node
		depth int
	}
	stack := []item{{n, 0}}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !visit(it.n, it.depth) {
			continue
		}
		for c := it.n.LastChild; c != nil; c = c.PrevSibling {
			stack = append(stack, item{c, it.depth + 1})
		}
	}
}

// find is the first element a in n's tree.
func find(n *html.Node, a atom.Atom) *html.Node {
	var found *html.Node
	each(n, func(c *html.Node, _ int) bool {
		if found != nil {
			return false
		}
		if c.Type == html.ElementNode && c.DataAtom == a {
			found = c
			return false
		}
		return true
	})
	return found
}

// textOf is the text of n's tree.
func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	each(n, func(c *html.Node, _ int) bool {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
			b.WriteByte(' ')
		}
		return c.Type != html.ElementNode || (c.DataAtom != atom.Script && c.DataAtom != atom.Style)
	})
	return b.String()
}

// prune removes hidden elements and inline data images.
func prune(doc *html.Node) {
	var drop []*html.Node
	each(doc, func(n *html.Node, _ int) bool {
		if n.Type != html.ElementNode {
			return true
		}
		if hidden(n) || n.DataAtom == atom.Img && strings.HasPrefix(strings.TrimSpace(attr(n, "src")), "data:") {
			drop = append(drop, n)
			return false
		}
		return true
	})
	for _, n := range drop {
		if n.Parent != nil {
			n.Parent.RemoveChild(n)
		}
	}
}

func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		switch strings.ToLower(a.Key) {
		case "hidden":
			return true
		case "aria-hidden":
			if strings.EqualFold(strings.TrimSpace(a.Val), "true") {
				return true
			}
		case "style":
			s := strings.ReplaceAll(strings.ToLower(a.Val), " ", "")
			if strings.Contains(s, "display:none") || strings.Contains(s, "visibility:hidden") {
				return true
			}
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if strings.EqualFold(a.Key, key) {
			return a.Val
		}
	}
	return ""
}

// mainContent picks the part of the page to convert: <main> (or
// role=main), else the only <article>, when it holds at least a third of
// the body's text; otherwise the body.
func mainContent(doc *html.Node) *html.Node {
	body := find(doc, atom.Body)
	if body == nil {
		return doc
	}
	var mains, articles []*html.Node
	each(body, func(n *html.Node, _ int) bool {
		if n.Type != html.ElementNode {
			return true
		}
		switch {
		case n.DataAtom == atom.Main || strings.EqualFold(attr(n, "role"), "main"):
			mains = append(mains, n)
			return false
		case n.DataAtom == atom.Article:
			articles = append(articles, n)
			return false
		}
		return true
	})
	var pick *html.Node
	switch {
	case len(mains) == 1:
		pick = mains[0]
	case len(mains) == 0 && len(articles) == 1:
		pick = articles[0]
	default:
		return body
	}
	if 3*len(oneLine(textOf(pick))) < len(oneLine(textOf(body))) {
		return body
	}
	return pick
}

// plainText is the title and the text of a page that cannot be parsed
// into a tree, read token by token, without scripts and styles.
func plainText(page string) (title, text string) {
	z := html.NewTokenizer(strings.NewReader(page))
	var b, t strings.Builder
	skip, inTitle := 0, false
	for {
		switch z.Next() {
		case html.ErrorToken:
			var lines []string
			for _, l := range strings.Split(b.String(), "\n") {
				if l = strings.TrimSpace(l); l != "" {
					lines = append(lines, l)
				}
			}
			return oneLine(t.String()), strings.Join(lines, "\n") + "\n"
		case html.StartTagToken:
			switch tok := z.Token(); tok.DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg:
				skip++
			case atom.Title:
				inTitle = true
			case atom.P, atom.Div, atom.Br, atom.Li, atom.Tr, atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
				b.WriteByte('\n')
			}
		case html.EndTagToken:
			switch z.Token().DataAtom {
			case atom.Script, atom.Style, atom.Noscript, atom.Template, atom.Svg:
				skip = max(skip-1, 0)
			case atom.Title:
				inTitle = false
			}
		case html.TextToken:
			switch {
			case inTitle:
				t.Write(z.Text())
			case skip == 0:
				b.WriteString(oneLine(string(z.Text())))
				b.WriteByte(' ')
			}
		}
	}
}
