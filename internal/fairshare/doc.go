// Package fairshare serves the worker's steps with a fair share per
// fairness key: an Intake reads a work stream (TURN_CALLS or TURN_TASKS)
// and decides whose step takes each free slot, so that one key's burst
// does not hold up the others and keys share the worker, and the fleet,
// in proportion to their weights.
//
// Data flows one way. The intake pulls steps from the work stream's
// durable consumer and reads each one's key and weight (KeyOf). It holds
// the step here, unacknowledged with its lease renewed, or, once the hold
// budget is spent or the key already has steps waiting there, moves it to
// the key's subject of TURN_BACKLOG (bus.StreamBacklog), from which every
// worker fetches per key. Whenever a slot frees, the dispatcher gives it
// to the key furthest behind its share, and the step goes to the handler
// through bus.Consumer.Handle, which acknowledges it, dead-letters it or
// has it delivered again. Stats and BacklogCounts show the keys to
// operators.
//
// How the share holds across a fleet is told above HeaderWeight.
package fairshare
