// Package gateway is the client side of the tool runtime's wire protocol
// (docs/protocol.md): what a gateway, the process that talks to the
// model, needs to drive turns against a fleet of workers over NATS
// JetStream.
//
// A turn is a loop. Ask for the turn's tool catalog ([Client.Catalog]),
// give the tools to the model, publish the model's response as step N
// ([Client.Send]), read its events until [protocol.StepDone], append
// its Items to the conversation, and call the model again unless its
// EndTurn is set. The messages and their names are package protocol,
// shared with the workers:
//
//	c, err := gateway.New(nc, gateway.Options{})
//	cat, err := c.Catalog(ctx, "a1", "t1", tc)
//	// … call the model with cat.Tools, get its output items …
//	run, err := c.Send(ctx, protocol.Step{AgentID: "a1", TurnID: "t1", Step: n, Context: tc, Output: output})
//	defer run.Close()
//	done, err := run.Wait(ctx)
//
// Every byte the model wrote and every byte the worker answered is passed
// through as [json.RawMessage]: tool definitions, output items and
// step.done items are never decoded and encoded again, so the catalog's
// digest (and the provider's prompt cache) holds.
//
// A turn's [protocol.Context].Fairness ([protocol.Fairness], protocol
// 1.2) names the share of the fleet its steps draw from: a key shared by a tenant's agents and
// a weight. Without it each agent is its own key with weight 1, so one
// agent's burst does not delay the others; with it, a tenant's agents
// together get the tenant's share.
//
// Besides steps, the client cancels turns ([Client.Cancel]), answers
// steps that wait for a person's approval ([Client.Decide]), and consumes
// the streams a gateway acts on: workflow events, whose task.ready starts
// a task turn ([Client.WorkflowEvents]), schedule fires, each the start of
// a main turn ([Client.ScheduleFires]), and the job runner's side of
// background jobs ([Client.JobEvents], [Client.ReportJob]).
//
// Nothing read from the bus is trusted: a malformed event is an error
// value ([*EventError]), never a panic, and a duplicate is dropped.
package gateway
