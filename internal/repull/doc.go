// Package repull keeps a durable JetStream consumer pulled: it watches
// one pull (nats.go's Consume, or its Messages iterator adapted to Pull)
// and, when the pull has stopped with steps stored for the consumer and
// no pull request waiting for them, drains it and starts another.
//
// nats.go counts the messages its pull requests still have coming and
// asks for more once fewer than half its batch are; when the server
// holds fewer than it counts, nothing more arrives to make it ask, and
// only its missed heartbeats (two of them) pull again. Two ways it gets
// there: it skips asking while the goroutine that sent its previous
// request has not yet run again after the send (pullSubscription's
// fetchInProgress, in v1.55.0 and v1.56.0), which on a loaded machine can
// outlast the delivery of all it asked for (the Messages iterator asks
// from Next, so there all it asked for must also have been taken: 15
// stalls of two heartbeats in 4,000 messages pulled two at a time, under
// the race detector on two busy cores); and a request the server drops
// (MaxWaiting) is still counted.
//
// The cost per message is two atomic stores and an atomic add (Taking,
// Took); the consumer's info is asked once per burst, when the messages
// stop coming, so an idle consumer asks the server nothing.
package repull
