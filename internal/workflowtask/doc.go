// Package workflowtask provides workflows: the main-turn tools that start,
// show, list and cancel them, the isolated task turns that produce their
// results, and their records in the WORKFLOWS bucket and events on
// workflow.event.<workflow_id>.
//
// One Service does all of it. cmd/worker builds it over the worker's
// JetStream context, adds Service.Category to the main assembler, and
// hands the Service itself to worker.New as its TaskTurns:
//
//	wf := workflowtask.New(js, workflowtask.Config{Web: web, Brain: brain, Logger: log})
//	w, err := worker.New(ctx, nc, cfg, turn.NewAssembler(wf.Category(), …), wf, log)
//
// Data flows like this:
//
//  1. start_workflow (a main turn) checks every task before storing
//     anything: ids, duplicates, and each result schema, by building the
//     strict submit_result the task turn will get. It then stores the task
//     records and the workflow record (create-only), publishes
//     workflow.started and one task.ready per task, and all tasks are
//     ready at once: they run in parallel, one task turn each.
//  2. The gateway starts each task turn on turn.task.<agent_id>.<turn_id>
//     with the turn id from task.ready. Its catalog (Catalog) is fixed:
//     web tools when web is bound, read-only recall and get_page when the
//     brain is bound, and submit_result built from the result schema
//     stored in WORKFLOWS. The step's context chooses among those three
//     and nothing else; the main assembler is never consulted.
//  3. Run dispatches the step against that set (turn.Runner.Dispatch:
//     claims, journal, call.output events, cancel), then reads the task
//     record back and decides the verdict for step.done: accepted,
//     rejected, repair, failed or active. submit_result validates the
//     value again against the stored schema and commits it with a
//     compare-and-set, so of any racing submissions exactly one commits.
//  4. Whoever ends a task (a commit, a failed step, a cancel) publishes
//     task.accepted or task.failed, then records the end in the
//     workflow's ledger with a compare-and-set; the update that ends the
//     last open task completes the workflow and publishes
//     workflow.completed. cancel_workflow instead marks the workflow
//     cancelled, fails its open tasks and publishes workflow.cancelled.
//
// Every write is a create-only or compare-and-set, every event has a
// fixed message id, and every verdict is read back from WORKFLOWS, so a
// step delivered again reaches the same verdict and finishes reporting
// what an earlier attempt began, never committing twice. The wire shapes
// are in docs/protocol.md ("Workflows") and package protocol
// (WorkflowEvent, Verdict, WorkflowTask).
package workflowtask
