// Package backgroundjobs provides the background agent job category: main-turn
// tools that start, show, list and cancel jobs that a gateway's job
// runner carries out in the background, and the watcher that records
// what the runner reports.
//
// The category exists in main (text) turns whose context binds
// "background_jobs" (the gateway binds it only where the turn may spawn
// jobs), never in workflow task turns.
//
// Data flows like this:
//
//  1. start_job stores the job in the JOBS bucket under
//     job.<agent_id>.<job_id> (status queued, create-only) and announces
//     it on job.start.<agent_id>.<job_id> (stream JOB_EVENTS), which the
//     job runner consumes.
//  2. The runner reports on job.report.<agent_id>.<job_id>: running with
//     progress, then succeeded with a result, or failed with an error (or
//     cancelled when it gave up). Service.Watch, run by every worker
//     beside worker.Run, consumes the reports from the durable consumer
//     job-reports and applies each to the job record with a
//     compare-and-set: an ended job never changes again, and a report
//     whose seq is not above the last applied one is stale and ignored.
//  3. show_job and list_jobs read the records. cancel_job marks the job
//     cancelled (final) and publishes job.cancel.<agent_id>.<job_id> for
//     the runner; whatever the runner reports afterwards is ignored.
//
// Every record write is create-only or compare-and-set, and every event
// the worker publishes has a fixed message id, so a call that is
// repeated, or two workers applying reports at once, leave one
// consistent record.
package backgroundjobs
