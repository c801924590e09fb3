// Package todo provides the todo category: the agent's working list for
// one turn, written whole with todo_write and read back with todo_read.
//
// The list lives in the TODOS key-value bucket under
// todo.<agent_id>.<turn_id>, so whichever worker serves the next step of
// the turn reads what an earlier step wrote; the bucket's TTL drops lists
// of turns that ended long ago. The category exists in every main (text)
// turn unless the turn's context binds "todo" to false, and never in a
// workflow task turn.
//
// Data flows like this: the model calls todo_write with every item and
// its status; the list is checked (sizes, at most one item in progress)
// and put under the turn's key, replacing what was there; the output and
// the activity label summarise progress ("2/5 done · Drafting notes").
// todo_read returns the stored list rendered the same way.
//
//	td, err := todo.New(ctx, js, todo.Config{Replicas: 3})
//	assembler := turn.NewAssembler(td.Category(), …)
package todo
