// Package turn provides per-turn tool assembly and the dispatch of a
// step's calls.
//
// An Assembler holds an explicit, ordered list of categories
// (tool.Category, the built-in ones and a program's own alike); for each
// main turn it asks every category for its tools given the turn (a
// category that is not bound returns none) and builds a Set, refusing
// duplicate names. A Set renders the Responses API catalog
// (namespaces grouped, deferred tools shortened, tool_search appended) and
// its digest, byte-identical for the same inputs.
//
// A Dispatcher runs one step against a Set: each call's tool is looked
// up and its arguments prepared, consecutive parallel calls run together
// (bounded) and each sequential call runs alone, in call order; outcomes
// come back in call order. One call, from its argument string to its
// result and the kind of its failure, is package tools' (internal/tools):
// a step's path is turn → tools → the tool. A Journal (the worker's TURN_STATE bucket) makes calls
// effectively-once across redelivery (journal.go), and the step's Hooks
// hear of calls as they start, report progress (at most once per
// ProgressInterval per call) and end, so that events are published as
// soon as each ends. One deadline per step, in the Dispatcher's queue, keeps the calls' deadlines
// (deadline.go); output.go builds each outcome's output item.
package turn
