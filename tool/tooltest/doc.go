// Package tooltest runs calls of a tool as a worker runs them, without
// NATS, for the tool's tests, as package net/http/httptest does for HTTP
// handlers: [Check] takes the model's argument string and returns what
// the model would read.
//
//	out := tooltest.Check(ctx, weather, `{"city": "Lisbon",}`) // repaired
//	if out.Err != nil || out.Output != "Sunny in Lisbon" {
//		t.Errorf("got %q, %v", out.Output, out.Err)
//	}
//
// The arguments go up the repair ladder and are validated against the
// tool's full schema, the call runs with its time limit and its identity
// in its context, a panic or a hang becomes an error output, and the
// output is the item the worker would publish, clipped to one event.
package tooltest
