package worker_test

import (
	"context"
	"log"
	"os/signal"
	"slices"
	"syscall"

	"github.com/nats-io/nats.go"

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

// A worker in a program of your own, on a connection of your own, with
// only your tools: reverse for the turns that bind "strings". Run serves
// until SIGINT or SIGTERM, then lets running steps finish within the
// grace.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	w, err := worker.New(nc, worker.Config{Name: "strings-1", Version: "1.0.0"}, tool.NewCategory("strings", reverse))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A program's whole main: cmd/worker, with its flags and built-in
// categories, and reverse for the turns that bind "strings".
func ExampleMain() {
	worker.Main(context.Background(), worker.Config{Version: "1.0.0"}, tool.NewCategory("strings", reverse))
}
