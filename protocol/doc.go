// Package protocol is the wire contract between gateways and the tool
// workers (docs/protocol.md, version 1.3): what a gateway publishes, what
// the workers answer, and under which names.
//
// A gateway publishes each model response of a turn as a [Step] on
// turn.call.<agent_id>.<turn_id> ([PrefixCall]; [PrefixTask] in a
// workflow task turn), with the message id [StepMsgID] and the turn's
// [Context]: its kind, bindings, approvals and [Fairness] share. The
// workers parse it with [ParseStep], run its calls and publish on
// turn.call.output.<agent_id>.<turn_id> (stream [StreamOutputs]) one
// [CallOutput] per call, then one [StepDone] with the items to append to
// the conversation; a step held for a person's approval first gets a
// [StepPending], answered with an [Approval]; a call held mid-run for a
// person's input (1.3) has an entry with an [InputRequest], answered with
// a [Decision] carrying its input. A call that fails carries a
// [CallError] whose [ErrorKind] says why. Progress of running calls comes
// as [Activity] on core NATS. Workflows, schedules and background jobs
// have their own events ([WorkflowEvent], [ScheduleFire], [JobEvent],
// [JobReport]).
//
// Every message carries its trace context in W3C Trace Context headers
// (traceparent, tracestate, baggage), which package gateway and the
// workers write and read.
//
// The package is a leaf: it imports only the standard library, so that
// both sides link it and a gateway (package gateway) or a tool (package
// tool) links nothing of the worker through it.
package protocol
