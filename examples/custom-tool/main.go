// Command custom-tool is a tool runtime worker with one tool of its own,
// count_words, in its own category beside the built-in ones. It uses only
// the public packages tool and worker, as a program outside this module
// would, and takes every flag cmd/worker takes:
//
//	go run ./examples/custom-tool --listen 127.0.0.1:4223 --monitor-port 0
//
// A turn gets count_words when its context binds "text_tools".
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/worker"
)

// CountParams are count_words' parameters; the schema the model sees is
// inferred from them.
type CountParams struct {
	Text string `json:"text" jsonschema:"description=The text to count the words of.,maxLength=100000"`
	Top  int    `json:"top,omitempty" jsonschema:"description=How many of the most frequent words to list (default 3).,minimum=1,maximum=20"`
}

var countWords = tool.Must(tool.Def[CountParams]{
	Spec: tool.Spec{
		Name:        "count_words",
		Description: "Count the words of a text and list the most frequent ones.",
		ReadOnly:    true, // so calls of one step run in parallel
	},
	Activity: func(p CountParams) string { return fmt.Sprintf("Counting the words of %d characters", len(p.Text)) },
	Execute: func(ctx context.Context, p CountParams) (tool.Result, error) {
		words := strings.FieldsFunc(strings.ToLower(p.Text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) && r != '\'' })
		if len(words) == 0 {
			return tool.Result{}, tool.Errorf(tool.InvalidArguments, "the text has no words; send the text to count")
		}
		freq := map[string]int{}
		for _, w := range words {
			freq[w]++
		}
		distinct := make([]string, 0, len(freq))
		for w := range freq {
			distinct = append(distinct, w)
		}
		sort.Slice(distinct, func(i, j int) bool {
			a, b := distinct[i], distinct[j]
			return freq[a] > freq[b] || freq[a] == freq[b] && a < b
		})
		top := p.Top
		if top == 0 {
			top = 3
		}
		var most []string
		for _, w := range distinct[:min(top, len(distinct))] {
			most = append(most, fmt.Sprintf("%s (%d)", w, freq[w]))
		}
		return tool.Result{
			Content: fmt.Sprintf("%d words, %d distinct; most frequent: %s", len(words), len(distinct), strings.Join(most, ", ")),
			Details: map[string]int{"words": len(words), "distinct": len(distinct)},
		}, nil
	},
})

// textTools is offered to the turns whose context binds "text_tools".
var textTools = tool.NewCategory("text_tools", countWords)

// version is set at build time with -ldflags "-X main.version=…".
var version = "1.0.0"

func main() {
	worker.Main(context.Background(), worker.Config{Version: version}, textTools) // after the built-in categories
}
