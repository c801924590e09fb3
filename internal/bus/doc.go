// Package bus provides the worker's NATS plumbing: the embedded server,
// the streams, consumers and buckets of the protocol (Setup, which refuses
// incompatible existing ones), the pull-consumer loop (Consumer: bounded
// concurrency, lease renewal, backoff, graceful stop), confirmed and
// retried publishing of events (Publisher), the same retries for the
// tools' own bucket and stream requests (Retry), dead letters (DeadLetters,
// including steps that reach the delivery limit), the TURN_STATE bucket
// (TurnState: call claims and stored outcomes, cancel marks, loaded
// deferred tools), the turn-worker micro service for catalogs, the cancel
// subscription, and trace context over NATS headers.
//
// Messages flow in through Consumer to a Handler (package worker) and out
// through Publisher; nothing here knows what a tool is.
package bus
