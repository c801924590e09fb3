package worker_test

import (
	"context"
	"slices"

	"github.com/agentbull/toolruntime/tool"
	"github.com/agentbull/toolruntime/worker"
)

type ReverseParams struct {
	Text string `json:"text" jsonschema:"description=The text to reverse."`
}

var reverse = tool.Must(tool.Def[ReverseParams]{
	Spec: tool.Spec{Name: "reverse", Description: "Reverse a text.", ReadOnly: true},
	Execute: func(_ context.Context, p ReverseParams) (tool.Result, error) {
		r := []rune(p.Text)
		slices.Reverse(r)
		return tool.Result{Content: string(r)}, nil
	},
})

// A program's whole main: the worker with its flags and built-in
// categories, and reverse for the turns that bind "strings".
func Example() {
	worker.Main(context.Background(), worker.Options{
		Version:    "1.0.0",
		Categories: append(worker.DefaultCategories(), worker.Tools(tool.NewCategory("strings", reverse))),
	})
}

// Categories in another order, one left out: a Category is a value.
func ExampleDefaultCategories() {
	var cats []worker.Category
	for _, c := range worker.DefaultCategories() {
		if c.Name() != "computer" { // never, whatever --computer-root says
			cats = append(cats, c)
		}
	}
	cats = append([]worker.Category{worker.Tools(tool.NewCategory("strings", reverse))}, cats...)
	_ = worker.Options{Categories: cats}
}
