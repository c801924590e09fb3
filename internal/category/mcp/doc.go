// Package mcp provides the MCP category: the tools of Model Context
// Protocol servers, one provider namespace per server, called through the
// official Go SDK.
//
// A Manager holds one client session per configured server (a stdio
// child process or a streamable HTTP endpoint). A session starts when a
// turn first needs its server and is shared by every later turn; a
// session found dead (the child exited, the HTTP session is gone, a
// request failed in transport) is closed, its child reaped, and a new one
// started on the next use. Attempts to reach a server that fails back off
// (MinBackoff doubling to MaxBackoff). Close ends every session.
//
// With Options.Cgroups, each stdio session's child starts in a cgroup of
// its own (Options.Limits: memory, pids, CPU), so that what a server and
// everything it starts hold is charged to it and bounded there, never to
// the worker; every server raises its oom_score_adj to 1000. When the
// session ends, what is left in the group is killed and the group
// removed. A server its memory limit killed is named so in the error of
// the call that was running and in the catalog's note.
//
// For a main turn, Category enables the servers the turn's context names,
// plus those its skills need (SkillServers), that this worker is
// configured with. Each server's tool list is cached per session and
// listed again after notifications/tools/list_changed; the tools built
// from a list (schemas compiled) are reused for as long as the list is
// the same, across turns and reconnects. Every MCP tool becomes a
// tool.Tool with P = json.RawMessage: its inputSchema is the raw
// parameters schema (validated before the call is sent; a tool whose
// schema is not a usable object schema, or whose name the provider would
// refuse, is left out with a note), its namespace is the server's name
// described by the configuration or the server's instructions, it is
// deferred behind tool search unless configured otherwise, and its
// annotations set ReadOnly (readOnlyHint: parallel) and Destructive (the
// specification's default for a tool that is not read-only, unless
// destructiveHint is false: sequential, no guessing repairs).
//
// A call runs with the call's context, so the dispatcher's timeout and
// the turn's cancel end it and the SDK sends notifications/cancelled.
// Text content is joined for the model, other content described in a
// line, structuredContent goes to the details, isError becomes a
// tool_error. A server that cannot be reached is a note in the catalog
// (its tools are those it listed last, or none) and a tool_error for each
// call, never a failed turn.
package mcp
