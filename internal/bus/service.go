package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/protocol"
	"github.com/agentbull/toolruntime/internal/telemetry/spans"
)

// CatalogFunc builds the catalog for a turn.
type CatalogFunc func(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error)

// ErrBadRequest marks a catalog request the gateway must fix; other
// errors are the worker's own.
var ErrBadRequest = errors.New("bad request")

// ProtocolVersion is the version of the wire contract (docs/protocol.md)
// this worker speaks; the micro service's metadata carries it as
// "protocol", for a gateway to check before it sends a turn.
const ProtocolVersion = "1.2"

// ServiceInfo describes this worker in the micro service's info and
// stats: its version (SemVer), and metadata that is added to "protocol"
// (the worker sets "worker_version" and "categories").
type ServiceInfo struct {
	Version  string
	Metadata map[string]string
	// Tracer, when set, records a span per catalog request, under the
	// trace context of the request's headers.
	Tracer trace.Tracer
	// Stats, when set, is the data of the endpoint's stats (`nats micro
	// stats turn-worker --json`): the worker's fair share by key.
	Stats func() any
}

// ServeCatalog registers the NATS micro service turn-worker with its
// endpoint tools on turn.tools, in the default queue group, so that each
// request is answered by one worker and `nats micro stats turn-worker`
// shows every instance.
func ServeCatalog(nc *nats.Conn, info ServiceInfo, catalog CatalogFunc, log *slog.Logger) (micro.Service, error) {
	meta := map[string]string{}
	for k, v := range info.Metadata {
		meta[k] = v
	}
	meta["protocol"] = ProtocolVersion // what the code speaks, whatever the caller says
	svc, err := micro.AddService(nc, micro.Config{
		Name:        protocol.ServiceName,
		Version:     info.Version,
		Description: "Tool runtime worker: per-turn tool catalogs",
		Metadata:    meta,
		StatsHandler: func(*micro.Endpoint) any {
			if info.Stats == nil {
				return nil
			}
			return info.Stats()
		},
	})
	if err != nil {
		return nil, fmt.Errorf("registering the %s service: %w", protocol.ServiceName, err)
	}
	handler := func(r micro.Request) {
		req, err := ParseCatalogRequest(r.Data())
		if err != nil {
			respondError(r, log, "400", err.Error())
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if info.Tracer != nil {
			var span trace.Span
			ctx, span = spans.ProcessRequest(ExtractTrace(ctx, nats.Header(r.Headers())), info.Tracer, protocol.SubjectTools, micro.DefaultQueueGroup)
			defer span.End()
		}
		reply, err := catalog(ctx, *req)
		if errors.Is(err, ErrBadRequest) {
			respondError(r, log, "400", err.Error())
			return
		}
		if err != nil {
			log.Error("building a catalog failed", "agent_id", req.AgentID, "turn_id", req.TurnID, "err", err)
			respondError(r, log, "500", "building the catalog failed: "+err.Error())
			return
		}
		reply.Notes = protocol.ClipList(reply.Notes, protocol.MaxNotes, protocol.MaxNoteBytes)
		data, err := json.Marshal(reply)
		if err != nil {
			respondError(r, log, "500", "encoding the catalog failed: "+err.Error())
			return
		}
		// A reply over the max payload would be refused by the client and
		// the requester would wait for nothing: it is told instead.
		if limit := int(nc.MaxPayload()) - protocol.HeaderRoom; len(data) > limit {
			log.Error("a catalog is too large for one reply", "agent_id", req.AgentID, "turn_id", req.TurnID, "bytes", len(data), "limit", limit)
			respondError(r, log, "413", fmt.Sprintf("the catalog is %d bytes, over the %d byte limit of one reply (the server's max payload less headers); bind fewer tools, skills or MCP servers", len(data), limit))
			return
		}
		if err := r.Respond(data); err != nil {
			log.Error("replying with a catalog failed", "agent_id", req.AgentID, "turn_id", req.TurnID, "bytes", len(data), "err", err)
		}
	}
	if err := svc.AddEndpoint("tools", micro.HandlerFunc(handler), micro.WithEndpointSubject(protocol.SubjectTools)); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("adding the tools endpoint: %w", err)
	}
	return svc, nil
}

// respondError sends a micro error reply, its description (a header)
// on one line and bounded, and logs a reply that could not be sent.
func respondError(r micro.Request, log *slog.Logger, code, description string) {
	if err := r.Error(code, headerValue(description, protocol.MaxErrorBytes), nil); err != nil {
		log.Error("sending an error reply failed", "code", code, "err", err)
	}
}

// ParseCatalogRequest decodes and checks a turn.tools request body.
func ParseCatalogRequest(data []byte) (*protocol.CatalogRequest, error) {
	var req protocol.CatalogRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("%w: body is not a catalog request: %v", ErrBadRequest, err)
	}
	switch {
	case !protocol.ValidID(req.AgentID):
		return nil, fmt.Errorf("%w: agent_id %q is not 1-64 characters of [A-Za-z0-9_-]", ErrBadRequest, req.AgentID)
	case !protocol.ValidID(req.TurnID):
		return nil, fmt.Errorf("%w: turn_id %q is not 1-64 characters of [A-Za-z0-9_-]", ErrBadRequest, req.TurnID)
	case req.Context.Kind != protocol.KindText && req.Context.Kind != protocol.KindWorkflowTask:
		return nil, fmt.Errorf("%w: context.kind %q is neither %q nor %q", ErrBadRequest, req.Context.Kind, protocol.KindText, protocol.KindWorkflowTask)
	}
	return &req, nil
}

// CancelFunc is told of a turn.cancel message.
type CancelFunc func(agentID, turnID, reason string)

// SubscribeCancels delivers every turn.cancel.<agent_id>.<turn_id>
// message to fn on this worker (no queue group: every worker must abort
// its own running calls of the turn).
func SubscribeCancels(nc *nats.Conn, fn CancelFunc) (*nats.Subscription, error) {
	return nc.Subscribe(protocol.PrefixCancel+".*.*", func(m *nats.Msg) {
		t := strings.Split(m.Subject, ".")
		if len(t) != 4 || !protocol.ValidID(t[2]) || !protocol.ValidID(t[3]) {
			return
		}
		var c protocol.Cancel
		_ = json.Unmarshal(m.Data, &c) // the body is optional
		// The reason is stored and quoted into the output of every call
		// the cancel reaches: it is bounded here, once.
		fn(t[2], t[3], protocol.ClipReason(c.Reason))
	})
}
