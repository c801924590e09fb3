// Package turnstate keeps the fleet's record of turns and calls in the
// TURN_STATE bucket, for package turn: the call journal that runs each
// call once whichever worker a step reaches (turn.Journal, turn.Recorder,
// turn.ReuseChecker), a turn's cancel mark and the deferred tools it
// loaded (turn.State), and the records of steps held for a person's
// approval (turn.Approvals). Store implements all of them.
//
// Data flows in from turn as it runs a step. A call's key is claimed
// with a create-only write before the call runs and holds its outcome
// after, so a redelivered step is answered from the bucket instead of
// running the call again; a read-only call's outcome is stored with one
// write (Record). A held step's record is created once, then its timer
// and step.pending event are published (Announce), and its decision is
// written over the revision it was read at (UpdatePending). Cancels come
// from the turn.cancel subscription (bus.SubscribeCancels): Remember
// marks the turn in this worker's mirror at once, and a CancelWriter
// writes the mark to the bucket and, when the turn has held steps, a note
// on TURN_APPROVALS; WatchCancels keeps the mirror in step with the other
// workers' marks. Writes go through bus.Publisher and its retries.
package turnstate
