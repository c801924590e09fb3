package turn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentbull/toolruntime/internal/turn"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// searchCorpus is a small set of deferred tools with distinct topics.
func searchCorpus(t testing.TB) []*tool.Tool {
	d := func(name, desc string, opts ...func(*tool.Spec)) *tool.Tool {
		return newTool(t, name, "", reply(name), append([]func(*tool.Spec){deferred, describe(desc)}, opts...)...)
	}
	gh := inNamespace("github", "GitHub repositories, issues and pull requests.")
	return []*tool.Tool{
		d("list_issues", "List the open issues of a repository.", gh),
		d("create_pull_request", "Open a pull request from a branch.", gh),
		d("send_email", "Send an email message to one or more recipients."),
		d("read_inbox", "Read the latest messages in the mailbox."),
		d("create_event", "Create a calendar event with attendees and a time."),
		d("get_weather", "Get the weather forecast for a city."),
		d("convert_currency", "Convert an amount between currencies at today's rate."),
		d("resize_image", "Resize or crop an image file."),
	}
}

func TestRank(t *testing.T) {
	corpus := searchCorpus(t)
	tests := []struct {
		query string
		limit int
		want  []string // exact answer, best first
	}{
		{"list github issues", 1, []string{"github.list_issues"}},
		{"issue", 1, []string{"github.list_issues"}},                          // plural folded
		{"pull requests", 1, []string{"github.create_pull_request"}},          // plural folded
		{"send an email", 1, []string{"send_email"}},                          // name counts twice
		{"calendar", 5, []string{"create_event"}},                             // only tools sharing a term
		{"weather forecast Paris", 5, []string{"get_weather"}},                // unknown terms ignored
		{"Currency CONVERSION", 1, []string{"convert_currency"}},              // case folded
		{"crop_image", 1, []string{"resize_image"}},                           // snake_case split
		{"create", 5, []string{"create_event", "github.create_pull_request"}}, // the shorter document wins
		{"quantum chromodynamics", 5, nil},
		{"send an email to the team", 5, []string{"send_email"}},      // stop words match nothing
		{"currencies", 1, []string{"convert_currency"}},               // -ies folded
		{"convertCurrency", 1, []string{"convert_currency"}},          // camelCase split
		{"mailbox messages", 5, []string{"read_inbox", "send_email"}}, // both share "message"
		{"", 5, nil},
		{"  !!  ", 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			got := names(turn.Rank(corpus, tt.query, tt.limit))
			if !slices.Equal(got, tt.want) && !(len(got) == 0 && len(tt.want) == 0) {
				t.Errorf("Rank(%q, %d) = %v, want %v", tt.query, tt.limit, got, tt.want)
			}
		})
	}
	// The best answer comes first among several matches.
	got := names(turn.Rank(corpus, "email messages", 3))
	if len(got) < 2 || got[0] != "send_email" || !slices.Contains(got, "read_inbox") {
		t.Errorf("Rank(email messages) = %v, want send_email first, read_inbox among them", got)
	}
	// Equal scores keep the set's order.
	alpha := newTool(t, "alpha", "", reply("a"), deferred, describe("Does the thing."))
	beta := newTool(t, "beta", "", reply("b"), deferred, describe("Does the thing."))
	if got := names(turn.Rank([]*tool.Tool{alpha, beta}, "thing", 5)); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Errorf("tie = %v, want set order alpha, beta", got)
	}
	if got := names(turn.Rank([]*tool.Tool{beta, alpha}, "thing", 5)); !slices.Equal(got, []string{"beta", "alpha"}) {
		t.Errorf("tie = %v, want set order beta, alpha", got)
	}
	if got := turn.Rank(corpus, "create", 1); len(got) != 1 {
		t.Errorf("limit 1 gave %d tools", len(got))
	}
	if got := turn.Rank(nil, "email", 3); len(got) != 0 {
		t.Errorf("empty corpus gave %v", names(got))
	}
}

// A namespace with long instructions for its description still ranks its
// tools by their own words, and weak matches are not loaded.
func TestRankFields(t *testing.T) {
	d := func(name, desc string, opts ...func(*tool.Spec)) *tool.Tool {
		return newTool(t, name, "", reply(name), append([]func(*tool.Spec){deferred, describe(desc)}, opts...)...)
	}
	long := inNamespace("everything", "Instructions for agents: "+strings.Repeat("use the tools with care and read the docs first; ", 40)+"echo is for tests.")
	short := inNamespace("go", "Echo text, add numbers.")
	corpus := []*tool.Tool{
		d("echo", "Echo the text back.", short),
		d("add", "Add two whole numbers.", short),
		d("echo", "Echoes back the input string.", long),
		d("getTinyImage", "Returns a tiny image.", long),
		d("gzip-file", "Compresses a file with gzip.", long),
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"echo a message", []string{"go.echo", "everything.echo"}}, // "echoes" folded; "a" ignored
		{"tiny image", []string{"everything.getTinyImage"}},        // camelCase split
		{"compress", []string{"everything.gzip-file"}},             // "compresses" folded
		{"add numbers", []string{"go.add"}},                        // the namespace's words weigh less
	}
	for _, tt := range tests {
		if got := names(turn.Rank(corpus, tt.query, 5)); !slices.Equal(got, tt.want) {
			t.Errorf("Rank(%q) = %v, want %v", tt.query, got, tt.want)
		}
	}
}

func TestToolSearchCall(t *testing.T) {
	corpus := searchCorpus(t)
	set := mustSet(t, append([]*tool.Tool{newTool(t, "ping", "", reply("pong"), readOnly)}, corpus...)...)
	d := &turn.Dispatcher{SearchLimit: 2}
	res := dispatch(t, context.Background(), d, set, input(searchCall("s1", `{"query":"github issues and pull requests"}`)))
	o := res.Outcomes[0]
	if o.Err != nil {
		t.Fatalf("search failed: %v", o.Err)
	}
	// Both are GitHub tools; "pull requests" matches the name twice over.
	if !slices.Equal(o.Loaded(), []string{"github.create_pull_request", "github.list_issues"}) {
		t.Errorf("Loaded = %v", o.Loaded())
	}
	if o.Name != "tool_search" || !strings.Contains(o.Activity, "github issues") {
		t.Errorf("name %q, activity %q", o.Name, o.Activity)
	}
	var item protocol.ToolSearchOutput
	if err := json.Unmarshal(o.Item, &item); err != nil {
		t.Fatal(err)
	}
	if item.Type != protocol.ItemToolSearchOutput || item.CallID != "s1" || item.Execution != "client" || item.Status != "completed" {
		t.Errorf("item %s", o.Item)
	}
	// Full definitions, inside their namespace entry.
	if len(item.Tools) != 1 {
		t.Fatalf("item tools %s, want one github namespace entry", o.Item)
	}
	var ns struct {
		Type  string            `json:"type"`
		Name  string            `json:"name"`
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(item.Tools[0], &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Type != "namespace" || ns.Name != "github" || len(ns.Tools) != 2 {
		t.Fatalf("namespace entry %s", item.Tools[0])
	}
	for i, name := range []string{"create_pull_request", "list_issues"} {
		if want := set.Lookup("github", name).Definition(); !bytes.Equal(ns.Tools[i], want) {
			t.Errorf("tool %d = %s, want the full definition %s", i, ns.Tools[i], want)
		}
	}

	// A plain deferred tool is listed directly.
	res = dispatch(t, context.Background(), d, set, input(searchCall("s2", `{"query":"weather"}`)))
	json.Unmarshal(res.Outcomes[0].Item, &item)
	if len(item.Tools) != 1 || !bytes.Equal(item.Tools[0], set.Lookup("", "get_weather").Definition()) {
		t.Errorf("item %s", res.Outcomes[0].Item)
	}

	// No match: a completed search that loads nothing.
	res = dispatch(t, context.Background(), d, set, input(searchCall("s3", `{"query":"ping"}`)))
	if o := res.Outcomes[0]; o.Err != nil || o.Loaded() != nil || !bytes.Contains(o.Item, []byte(`"tools":[]`)) {
		t.Errorf("search for a non-deferred tool: %+v %s", o.Err, o.Item)
	}
}

func TestToolSearchBadArguments(t *testing.T) {
	set := mustSet(t, searchCorpus(t)...)
	for _, args := range []string{``, `{}`, `{"query":""}`, `{"query":"   "}`, `"email"`, `{"query":7}`} {
		res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(searchCall("s1", args)))
		o := res.Outcomes[0]
		if kind(o) != tool.InvalidArguments || o.Loaded() != nil {
			t.Errorf("arguments %s: %v, loaded %v; want invalid_arguments", args, o.Err, o.Loaded())
		}
		var item protocol.ToolSearchOutput
		if err := json.Unmarshal(o.Item, &item); err != nil || item.Type != protocol.ItemToolSearchOutput || item.Tools == nil {
			t.Errorf("arguments %s: item %s is not an empty tool_search_output", args, o.Item)
		}
	}
}

// Loading happens through the step: the loaded keys make the tool callable.
func TestToolSearchThenCall(t *testing.T) {
	set := mustSet(t, searchCorpus(t)...)
	d := &turn.Dispatcher{}
	res := dispatch(t, context.Background(), d, set, input(searchCall("s1", `{"query":"send email"}`), call("c2", "send_email", `{}`)))
	if kind(res.Outcomes[1]) != tool.NotLoaded {
		t.Errorf("a tool found in the same step is not loaded yet: %v", res.Outcomes[1].Err)
	}
	loaded := map[string]bool{}
	for _, k := range res.Outcomes[0].Loaded() {
		loaded[k] = true
	}
	in := input(call("c3", "send_email", `{}`))
	in.Loaded = loaded
	res = dispatch(t, context.Background(), d, set, in)
	if o := res.Outcomes[0]; o.Err != nil || output(t, o) != "send_email" {
		t.Errorf("the loaded tool: %v %q", o.Err, output(t, o))
	}
}

func TestToolSearchLabelIsValidUTF8(t *testing.T) {
	set := mustSet(t, searchCorpus(t)...)
	q := "x" + strings.Repeat("é", 40) + " email" // 80+ bytes: cut at byte 60, inside an é
	args, _ := json.Marshal(map[string]string{"query": q})
	res := dispatch(t, context.Background(), &turn.Dispatcher{}, set, input(searchCall("s1", string(args))))
	label := res.Outcomes[0].Activity
	if !utf8.ValidString(label) || !strings.HasSuffix(label, "…”") {
		t.Errorf("label %q", label)
	}
}
