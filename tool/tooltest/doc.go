// Package tooltest runs calls of a tool as a worker runs them, without
// NATS, for the tool's own tests, as package net/http/httptest does for
// HTTP handlers: [Check] takes the model's argument string and returns
// what the model would read and the item the worker would publish.
package tooltest
