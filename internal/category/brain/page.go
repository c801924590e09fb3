package brain

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/protocol"
)

// Limits of titles and lines.
const (
	MaxTitleBytes = 200
	// MaxLineBytes is the longest line get_page and snippets count as
	// one: a longer line of the body is counted as several, cut on rune
	// boundaries, so that every part of a page can be reached by line.
	MaxLineBytes = 1000
)

// Page is the value of a page's key.
type Page struct {
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UpdatedBy is the call that wrote the page last.
	UpdatedBy *protocol.CallRef `json:"updated_by,omitempty"`
}

// Key is the BRAIN key of an agent's page.
func Key(agentID, title string) string {
	return "page." + agentID + "." + base64.RawURLEncoding.EncodeToString([]byte(title))
}

// agentFilter matches every page key of an agent.
func agentFilter(agentID string) string { return "page." + agentID + ".>" }

// normTitle trims a title and checks it, with a message for the model.
func normTitle(title string) (string, error) {
	t := strings.TrimSpace(title)
	switch {
	case t == "":
		return "", fmt.Errorf("the page title is empty")
	case len(t) > MaxTitleBytes:
		return "", fmt.Errorf("the page title is %d bytes; at most %d", len(t), MaxTitleBytes)
	case !utf8.ValidString(t):
		return "", fmt.Errorf("the page title is not valid UTF-8")
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return "", fmt.Errorf("the page title contains a control character (%U); titles are one line", r)
		}
	}
	return t, nil
}

// splitLines cuts a body into the lines get_page counts: at newlines,
// and long lines every MaxLineBytes. A final newline ends the last line
// rather than starting an empty one.
func splitLines(body string) []string {
	if body == "" {
		return nil
	}
	raw := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	out := make([]string, 0, len(raw))
	for _, l := range raw {
		l = strings.TrimSuffix(l, "\r")
		for len(l) > MaxLineBytes {
			cut := MaxLineBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			if cut == 0 {
				cut = MaxLineBytes
			}
			out = append(out, l[:cut])
			l = l[cut:]
		}
		out = append(out, l)
	}
	return out
}
