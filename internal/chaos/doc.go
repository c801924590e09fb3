// Package chaos is the proof of the worker's delivery promises under
// faults, shared by the cluster test (internal/engine) and the chaos
// program (cmd/chaos).
//
// A run drives a JetStream cluster of embedded servers (natstest.Cluster)
// with R3 streams, consumers and buckets, and a fleet of worker processes
// (the cmd/worker binary, with the diagnostics tools and a mark directory
// each). A gateway publishes main-turn steps, each with a read-only ping
// and a non-read-only mark (which appends its unique label to the
// process's marks.log); every so often a step calls start_workflow
// instead, and the gateway runs each announced task's turn, calling
// submit_result until the task ends, as a real gateway would.
//
// Meanwhile it injects faults (Fault): it stops the node that leads
// TURN_CALLS, TURN_OUTPUTS or TURN_STATE and restarts it on its store,
// SIGKILLs a worker process and starts another, and restarts every node
// one by one. Faults are injected either every Config.FaultEvery or, for a
// run of a fixed number of steps, spread evenly over its publishing.
//
// When every step has its step.done (or nothing has moved for
// Config.StallTimeout), it reads back what is stored and checks:
//
//   - every published step has exactly one step.done in TURN_OUTPUTS, and
//     every call of it exactly one call.output (the stream holds no
//     duplicates, and no event for a step that was never published);
//   - no non-read-only tool body ran twice: each mark label appears at
//     most once across every process's marks.log, and exactly once when
//     its call reported ok; no start_workflow created two workflows;
//   - every task whose submit_result got an accepted step.done has its
//     result committed in WORKFLOWS (the task record) and a task.accepted
//     event carrying it;
//   - no workflow write failed (a start_workflow that ended in an error
//     other than interrupted, a submit_result whose value could not be
//     recorded): the workflow writes survive the faults;
//   - nothing was dead-lettered and the work queues are empty.
//
// The figures and every violation found are in the Report.
package chaos
