// Package toolhooks is the door between package tool, where a tool is
// defined, and internal/tools, where the worker runs its calls. A
// *tool.Tool keeps here what only the worker reads: its compiled
// parameters schema and the decoding of a call's arguments into its
// parameter type (Hooks). tool.New builds the Hooks and Sets them in the
// Anchor every Tool embeds; internal/tools reads them back with Of. The
// keys under which a call's context answers tool.CallFrom and
// tool.ReportProgress are here too, so that internal/tools can make that
// context.
//
// Anchor's one method is unexported, so nothing of this package shows in
// tool's API, and no variable is shared: each tool carries its own hooks.
package toolhooks
