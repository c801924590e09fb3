// Package protocol provides the wire contract between the gateway and the
// workers (docs/protocol.md): the names of subjects, streams, consumers
// and buckets, message ids and state keys, the step message with its
// strict parser (ParseStep, which every message from the wire goes
// through), and the events and Responses API items the worker publishes.
package protocol
