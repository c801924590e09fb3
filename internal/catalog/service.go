package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentbull/toolruntime/internal/bus"
	"github.com/agentbull/toolruntime/internal/spans"
	"github.com/agentbull/toolruntime/internal/textclip"
	"github.com/agentbull/toolruntime/internal/traceheader"
	"github.com/agentbull/toolruntime/internal/wire"
	"github.com/agentbull/toolruntime/protocol"
)

// Func builds the catalog for a turn.
type Func func(ctx context.Context, req protocol.CatalogRequest) (*protocol.CatalogReply, error)

// ErrBadRequest marks a catalog request the gateway must fix; other
// errors are the worker's own.
var ErrBadRequest = errors.New("bad request")

// ProtocolVersion is the version of the wire contract (docs/protocol.md)
// this worker speaks; the micro service's metadata carries it as
// "protocol", for a gateway to check before it sends a turn.
const ProtocolVersion = "1.3"

// Info describes this worker in the micro service's info and
// stats: its version (SemVer), and metadata that is added to "protocol"
// (the worker sets "worker_version" and "categories").
type Info struct {
	Version  string
	Metadata map[string]string
	// Tracer, when set, records a span per catalog request, under the
	// trace context of the request's headers.
	Tracer trace.Tracer
	// Limits bound the catalog requests built at once.
	Limits Limits
	// Stats, when set, is the data of the endpoint's stats (`nats micro
	// stats turn-worker --json`): the worker's fair share by key.
	Stats func() any
}

// Service is the turn-worker micro service. Stop stops it and
// waits for the requests it is answering.
type Service struct {
	micro.Service
	wg   sync.WaitGroup
	gate *keyGate
}

// Stop stops the service (no more requests are taken) and waits for the
// requests under way to be answered.
func (s *Service) Stop() error {
	err := s.Service.Stop()
	s.wg.Wait()
	return err
}

// catalogTimeout bounds building one catalog, waiting for a slot
// included.
const catalogTimeout = 10 * time.Second

// Serve registers the NATS micro service turn-worker with its
// endpoint tools on turn.tools, in the default queue group, so that each
// request is answered by one worker and `nats micro stats turn-worker`
// shows every instance. Requests are answered concurrently within
// info.Limits: a slow catalog (an MCP server starting) holds up only
// the requests that wait for it, and one key's flood only its own.
func Serve(nc *nats.Conn, info Info, catalog Func, log *slog.Logger) (*Service, error) {
	if err := info.Limits.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
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
	gate := newKeyGate(info.Limits)
	cs := &Service{Service: svc, gate: gate}
	build := func(r detachedRequest, req *protocol.CatalogRequest) {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		defer cancel()
		key := req.Context.Fairness.KeyFor(req.AgentID)
		release, err := gate.acquire(ctx, key)
		if err != nil {
			log.Warn("a catalog request found no slot", "agent_id", req.AgentID, "turn_id", req.TurnID, "fairness_key", key, "err", err)
			respondError(r, log, "503", fmt.Sprintf("this worker has too many catalog requests of fairness key %q under way (%v); try again", key, err))
			return
		}
		defer release()
		if info.Tracer != nil {
			var span trace.Span
			ctx, span = spans.ProcessRequest(traceheader.Extract(ctx, r.header), info.Tracer, protocol.SubjectTools, micro.DefaultQueueGroup)
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
		reply.Notes = textclip.List(reply.Notes, wire.MaxNotes, wire.MaxNoteBytes)
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
	// The micro handler runs on the subscription's one goroutine: it only
	// parses and hands the request on, so that no request waits behind
	// another's build.
	handler := func(r micro.Request) {
		req, err := ParseRequest(r.Data())
		if err != nil {
			respondError(r, log, "400", err.Error())
			return
		}
		// The build answers after this handler has returned, so it must not
		// touch r: micro reads r's error state when the handler returns, and a
		// later write from the build goroutine would race with it.
		d := detachedRequest{nc: nc, reply: r.Reply(), header: nats.Header(r.Headers())}
		cs.wg.Go(func() { build(d, req) })
	}
	if err := svc.AddEndpoint("tools", micro.HandlerFunc(handler), micro.WithEndpointSubject(protocol.SubjectTools)); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("adding the tools endpoint: %w", err)
	}
	return cs, nil
}

// errorResponder is what respondError needs of a request: a micro
// request, or a detachedRequest answered after its handler returned.
type errorResponder interface {
	Error(code, description string, data []byte, opts ...micro.RespondOpt) error
}

// detachedRequest answers a micro request from outside its handler, with
// the same reply shape as micro's (its error headers), without writing to
// the micro request that the service reads for its stats.
type detachedRequest struct {
	nc     *nats.Conn
	reply  string
	header nats.Header
}

// Respond publishes data to the request's reply subject.
func (d detachedRequest) Respond(data []byte) error {
	return d.nc.PublishMsg(&nats.Msg{Subject: d.reply, Data: data})
}

// Error publishes a micro error reply: the Nats-Service-Error and
// Nats-Service-Error-Code headers, and data as the body.
func (d detachedRequest) Error(code, description string, data []byte, _ ...micro.RespondOpt) error {
	return d.nc.PublishMsg(&nats.Msg{Subject: d.reply, Data: data, Header: nats.Header{
		micro.ErrorHeader:     []string{description},
		micro.ErrorCodeHeader: []string{code},
	}})
}

// respondError sends a micro error reply, its description (a header)
// on one line and bounded, and logs a reply that could not be sent.
func respondError(r errorResponder, log *slog.Logger, code, description string) {
	if err := r.Error(code, bus.HeaderValue(description, wire.MaxErrorBytes), nil); err != nil {
		log.Error("sending an error reply failed", "code", code, "err", err)
	}
}

// ParseRequest decodes and checks a turn.tools request body.
func ParseRequest(data []byte) (*protocol.CatalogRequest, error) {
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
