// Package engine runs the worker's stages on one NATS connection: it sets
// up the protocol's streams, consumers and buckets (bus), takes steps of
// the work streams through the fair-share intake (fairshare), dispatches
// each against the turn's tool set (turn, which runs each call through
// tools), keeps calls effectively-once and approvals durable in the
// TURN_STATE store (turnstate), publishes the events (bus.Publisher) and
// answers turn.tools requests (catalog).
//
// Config is the one configuration of this layer: each default is written
// once, in withDefaults or as a named constant of the package that uses
// it, and RegisterFlags registers the flags from it. Package worker (the
// public one) maps its Config onto this one and adds the program around
// it.
package engine
