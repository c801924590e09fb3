// Package bus is the worker's NATS plumbing: it moves messages to and
// from the server and knows nothing of tools or turns.
//
// It starts the embedded server (StartEmbedded); creates the protocol's
// streams, consumers and buckets, refusing incompatible existing ones
// (Setup, Topology); runs a handler over a durable pull consumer with
// bounded concurrency, lease renewal, backoff and a graceful stop
// (Consumer); publishes events, each under a producer span whose trace
// context rides in its headers, and other stream messages, all confirmed
// and retried (Publisher); gives bucket and stream requests the same
// retries (Retry); copies steps that cannot be processed, or that reach
// the delivery limit, to the dead-letter stream (DeadLetters); and
// delivers turn.cancel messages (SubscribeCancels).
//
// Messages flow in through a Consumer, or through an intake of package
// fairshare that settles each one with Consumer.Handle, to a Handler, and
// out through a Publisher. What they mean is left to the packages above:
// fairshare (whose step runs next), turnstate (the TURN_STATE bucket),
// catalog (the turn.tools service) and the worker.
package bus
