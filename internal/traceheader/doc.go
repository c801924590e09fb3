// Package traceheader carries trace context across NATS for the worker:
// Inject writes the W3C traceparent, tracestate and baggage of a context
// into a message's headers as it is published, and Extract reads a
// received message's back into the context of the code that handles it,
// so that its spans join the sender's trace. The wire contract (package
// protocol) names the headers and links no tracing library; package
// gateway writes the same headers with its own few lines, so that a
// client links nothing of the worker.
package traceheader
