// Package traceheader carries trace context across NATS: Inject writes
// the W3C traceparent, tracestate and baggage of a context into a
// message's headers as it is published (by a gateway or a worker), and
// Extract reads them back into the context of the code that handles the
// message, so that its spans join the sender's trace. The wire contract
// (package protocol) names the headers; this is the code that writes them,
// apart so that the contract links no tracing library.
package traceheader
