package catalog_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/agentbull/toolruntime/internal/catalog"
	"github.com/agentbull/toolruntime/internal/natstest"
	"github.com/agentbull/toolruntime/protocol"
)

// The micro service's info, as `nats micro info` asks for it over NATS,
// says the protocol version beside what the worker adds; the worker
// cannot override "protocol".
func TestServiceMetadata(t *testing.T) {
	t.Parallel()
	s := natstest.Start(t)
	nc := s.Connect(t)
	build := func(context.Context, protocol.CatalogRequest) (*protocol.CatalogReply, error) {
		return &protocol.CatalogReply{}, nil
	}
	svc, err := catalog.Serve(nc, catalog.Info{Version: "1.4.0", Metadata: map[string]string{
		"worker_version": "1.4.0", "categories": "todo,web", "protocol": "0.9",
	}}, build, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Stop()
	// The service's subscriptions reach the server with a flush, before
	// another connection asks.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	client := s.Connect(t)
	msg, err := client.Request("$SRV.INFO."+protocol.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"protocol": catalog.ProtocolVersion, "worker_version": "1.4.0", "categories": "todo,web"}
	for k, v := range want {
		if info.Metadata[k] != v {
			t.Errorf("metadata %s=%q, want %q (all: %v)", k, info.Metadata[k], v, info.Metadata)
		}
	}
	if info.Version != "1.4.0" || catalog.ProtocolVersion != "1.3" {
		t.Errorf("version %q, protocol %q", info.Version, catalog.ProtocolVersion)
	}
}
