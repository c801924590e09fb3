// Package catalog answers turn.tools: it registers the turn-worker NATS
// micro service, whose one endpoint gives a gateway the tool catalog of
// a turn before the turn's steps are sent.
//
// Data flows request by request. The micro handler parses and checks the
// request (ParseRequest; a malformed one is answered 400 at once) and
// hands it to a goroutine of its own, so that no request waits behind
// another's build. There it waits for a slot at a gate per fairness key
// (Limits: per key, in total, and how many of a key may wait; past that
// it is answered 503), then the worker's Func builds the catalog, which
// is sent as the reply; an ErrBadRequest is answered 400, another error
// 500, a catalog over the connection's max payload 413. The service's
// metadata carries ProtocolVersion, and its stats what Info.Stats gives.
package catalog
