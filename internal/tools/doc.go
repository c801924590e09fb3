// Package tools provides the tool contract: what a tool declares (name,
// description, parameters, strict, namespace, deferred loading, execution
// mode, read-only and destructive flags, activity labels) and how it runs.
//
// A tool author writes a typed Def[P] with Execute(ctx, P) and calls New,
// which infers or compiles the schema once, checks the definition and
// precomputes the provider definition. At call time Tool.Prepare validates
// (and where the tool allows, repairs) the model's argument string and
// decodes it into P, giving an Invocation; Invocation.Run executes it,
// turning panics and plain errors into coded *Error values. Nothing here
// knows about turns or NATS: package turn assembles and dispatches tools.
package tools
