// Package mcpdoor serves a fleet's tools over the Model Context Protocol
// (Streamable HTTP, stateless): the door is an http.Handler that any MCP
// client reaches, and it talks to the workers over NATS as a gateway
// does, through package gateway.
//
// A request flows: Host/Origin allow-list, bearer token (a principals
// file's token hashes, or JWT access tokens of a configured issuer),
// the principal's bound on requests in flight, then the official Go SDK's
// stateless handler, which serves both the 2026-07-28 era (server/discover,
// per-request _meta) and 2025-11-25 clients (initialize, then each request
// alone). tools/list is the principal's catalog from turn.tools; tools/call
// publishes a one-call step and answers with the call's output.
//
// No replica keeps anything a later request needs: the tool list comes
// from the workers (cached for a few seconds per principal, a cache only),
// the step numbers of a named turn from a JetStream key-value counter, and
// the calls' state from the turn's streams. Replicas behind a proxy that
// alternates requests serve a client with no affinity.
//
// The principal fixes every part of a turn a client must not choose: the
// agent id, the fairness share, the bindings, skills, MCP servers and the
// approval scope. A client may name a turn (MetaTurn) and a call
// (MetaCall) in a request's _meta, always under its own agent.
package mcpdoor
