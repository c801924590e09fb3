package tool

import (
	"context"

	"github.com/agentbull/toolruntime/internal/tools"
)

// Def is a typed tool definition: the author writes Execute over decoded,
// validated parameters and never touches raw JSON. Its fields:
//
//   - Spec: the name, description and scheduling of the tool ([Spec]).
//   - Activity func(P) string: a short progress label user interfaces show
//     while the call runs ("Fetching https://…").
//   - CompletedActivity func(P, Result) string: when set, the label once
//     the call ended.
//   - Execute func(ctx context.Context, p P) (Result, error): the work. ctx
//     ends when the call's time is up or the turn is cancelled, and carries
//     the call's identity ([CallFrom]) and its progress reporter
//     ([ReportProgress]).
//
// The parameters schema is inferred from P's exported fields with their
// json and jsonschema tags (github.com/invopop/jsonschema's syntax: e.g.
// `jsonschema:"description=…,minimum=1,enum=a,enum=b"`). Fields without
// omitempty are required.
type Def[P any] = tools.Def[P]

// Spec is the part of a tool the runtime reads: what the model is told and
// how calls are scheduled. The zero value of each optional field works:
//
//   - Name (required): what the model sees and calls, ^[a-zA-Z0-9_-]{1,64}$.
//   - Description (required): what the model reads to decide to call it.
//   - JSONSchema: a parameters schema sent as given instead of the one
//     inferred from P; every keyword is kept.
//   - Strict: send a raw JSONSchema in strict mode. An inferred schema is
//     always sent strict unless NotStrict says why not.
//   - NotStrict: why an inferred schema is sent without strict mode; New
//     fails without it when strict mode cannot express the schema exactly
//     (a map field, a keyword strict mode lacks).
//   - Namespace, NamespaceDescription: group related tools under one name.
//   - DeferLoading: list the tool by name only until the model loads it
//     with tool search (for large catalogs).
//   - ExecutionMode: [Parallel] or [Sequential]; the default is Parallel
//     for ReadOnly tools and Sequential for every other tool.
//   - ReadOnly: the tool changes nothing, so it may run again after a
//     worker crashed while it ran.
//   - Destructive: the tool never takes a guessing repair of its arguments
//     and must be sequential.
//   - Timeout: the limit of one call; zero is the worker's --call-timeout.
type Spec = tools.Spec

// Result is what a tool returns:
//
//   - Content: the text the model reads.
//   - Media: images and files the model also reads, after Content ([Media]).
//   - Details: structured data for logs and user interfaces, never sent to
//     the model; it must marshal to JSON.
//   - Events: presentation events for user interfaces ([Event]).
//   - CompleteActorEvent: marks the actor event the turn answers as done.
//   - EndTurn: asks the agent loop to stop after this step.
type Result = tools.Result

// Media is an image or a file a tool returns beside its text: MIMEType
// ("image/png", "application/pdf"), Data, Filename (names a file part) and
// Source (where the content is, quoted when it does not fit the output
// budget and is left out).
type Media = tools.Media

// Event is a presentation event a tool emits for user interfaces: a Type
// and Data that marshals to JSON.
type Event = tools.Event

// Mode says whether a call may run beside the other calls of its step.
type Mode = tools.Mode

const (
	// Parallel calls that stand next to each other in a step run at once.
	Parallel = tools.Parallel
	// Sequential calls start after every earlier call of the step has
	// ended, and no later call starts before they end.
	Sequential = tools.Sequential
)

// Tool is a defined tool, ready to be put in a [Category]. It is immutable
// and shared by every turn that uses it. Its methods Name, Spec (with the
// defaults applied) and Definition (the Responses API function definition
// the model is sent) describe it.
type Tool = tools.Tool

// New defines a tool. The parameters schema comes from Spec.JSONSchema
// when set, otherwise it is inferred from P once. A definition a provider
// would refuse, or that could not run safely (no Execute, a bad name, a
// read-only destructive tool, a schema strict mode cannot express without
// Spec.NotStrict), is an error naming the tool.
func New[P any](d Def[P]) (*Tool, error) { return tools.New(d) }

// Must is [New] for definitions fixed at compile time: a bad one panics.
func Must[P any](d Def[P]) *Tool { return tools.Must(d) }

// Call identifies the call a tool is executing (AgentID, TurnID, Step,
// CallID), for tools that keep state per agent or per turn.
type Call = tools.Call

// CallFrom returns the identity of the call ctx runs; ok is false outside
// a call.
func CallFrom(ctx context.Context) (c Call, ok bool) { return tools.CallFrom(ctx) }

// ReportProgress reports the progress of the call ctx runs: done so far,
// total when known (0: unknown) and a short label (may be empty). User
// interfaces see it as the call's activity; the worker rate-limits what it
// publishes, so a tool may call it as often as it likes, and it costs
// nothing when nobody listens.
func ReportProgress(ctx context.Context, done, total int64, label string) {
	tools.ReportProgress(ctx, done, total, label)
}
