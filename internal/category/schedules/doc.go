// Package schedules provides the schedules category: create_schedule,
// list_schedules and delete_schedule, which let an agent start a turn of
// its own later, once or on a cron expression.
//
// A schedule is a message in the SCHEDULES stream carrying JetStream's
// scheduling headers (nats-server 2.12 and later): the server, not a
// worker, keeps the time and publishes the fire to the gateway's subject,
// so a schedule outlives every worker. Listing and deleting read and
// purge the agent's own subjects only.
package schedules
