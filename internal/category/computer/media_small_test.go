package computer_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentbull/toolruntime/internal/category/computer"
	"github.com/agentbull/toolruntime/internal/engine"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/internal/workertest"
	"github.com/agentbull/toolruntime/protocol"
	"github.com/agentbull/toolruntime/tool"
)

// TestMediaOverNATSSmallPayload: on a server whose max payload is 64 KiB
// (read from the connection, not assumed), the media budget shrinks to
// half an event: every call.output of a step of large images and a PDF
// fits, holds its image scaled down, and step.done fits with one item
// per call.
func TestMediaOverNATSSmallPayload(t *testing.T) {
	// Its own server and homes, as TestMediaOverNATS.
	t.Parallel()
	const maxPayload = 64 << 10
	srv := natstest.StartWith(t, func(o *server.Options) { o.MaxPayload = maxPayload })
	c := newCategory(t, computer.Config{})
	h := home(t, c, agent)
	var paths []string
	for i := range 6 {
		p := "big/" + string(rune('a'+i)) + ".png"
		writeBytes(t, filepath.Join(h, p), picture(t, 500+20*i, 375, true))
		paths = append(paths, p)
	}
	writeBytes(t, filepath.Join(h, "small.pdf"), pdfOf(18<<10))
	paths = append(paths, "small.pdf")
	workertest.RunWorker(t, srv, "w1", func(jetstream.JetStream) ([]tool.Category, engine.TaskTurns) {
		return []tool.Category{c.Category()}, nil
	})
	gw := workertest.NewGateway(t, srv)
	if gw.NC.MaxPayload() != maxPayload {
		t.Fatalf("max payload %d", gw.NC.MaxPayload())
	}
	oc, err := gw.JS.OrderedConsumer(context.Background(), protocol.StreamOutputs,
		jetstream.OrderedConsumerConfig{FilterSubjects: []string{protocol.Subject(protocol.PrefixOutput, agent, "t-small")}})
	if err != nil {
		t.Fatal(err)
	}
	var calls []workertest.Call
	for i, p := range paths {
		calls = append(calls, workertest.FC(callID(i), computer.ReadFileName, `{"path":"`+p+`"}`))
	}
	gw.SendStep(protocol.PrefixCall, agent, "t-small", 0, protocol.Context{Kind: protocol.KindText, Bindings: map[string]bool{"computer": true}}, calls...)
	outs := map[string]mediaEvent{}
	var done mediaEvent
	for done.Type == "" {
		m, err := oc.Next(jetstream.FetchMaxWait(30 * time.Second))
		if err != nil {
			t.Fatalf("waiting for the events: %v", err)
		}
		var ev mediaEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatal(err)
		}
		ev.size = len(m.Data()) + headerBytes(m.Headers())
		if ev.size > maxPayload {
			t.Errorf("%s %s of %d bytes, over the max payload", ev.Type, ev.Call, ev.size)
		}
		if ev.Type == protocol.EventStepDone {
			done = ev
		} else {
			outs[ev.Call] = ev
		}
	}
	for i, p := range paths {
		fo := outs[callID(i)].Item
		want := "input_image"
		if strings.HasSuffix(p, ".pdf") {
			want = "input_file"
		}
		if len(fo.Content) != 2 || fo.Content[1].Type != want {
			t.Errorf("call.output of %s: %.300v", p, fo)
		}
	}
	if len(done.Items) != len(paths) {
		t.Fatalf("%d items for %d calls", len(done.Items), len(paths))
	}
	kept := 0
	for i, fo := range done.Items {
		switch {
		case len(fo.Content) == 2:
			kept++
		case !strings.Contains(fo.Output, "from "+paths[i]+" in your home, because the step's outputs were over the size limit of one event"):
			t.Errorf("step.done item %d: %.300q", i, fo.Output)
		}
	}
	if kept == 0 || kept == len(paths) {
		t.Errorf("%d of %d media kept whole in step.done", kept, len(paths))
	}
}
