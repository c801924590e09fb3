// Package skills provides the skills category: know-how for particular
// tasks, written as Agent Skills (one folder per skill holding SKILL.md,
// YAML front matter then Markdown), and projected into the turns that
// enable them.
//
// Load reads a directory once at start into a Library; a SKILL.md that
// does not parse stops the start with its path and the problem. Front
// matter: name (required; lower-case letters, digits and hyphens, equal
// to the folder's name), description (required, at most 1024 bytes), and
// the MCP servers the skill needs, from any of mcp_servers (a list, or a
// string of names), metadata.mcp_servers, and allowed-tools entries
// mcp__<server> or mcp__<server>__<tool>. Other fields are ignored.
//
// For a main turn, Category intersects the context's skills with the
// library's and contributes one read-only tool, read_skill, whose
// description lists each enabled skill's name and description and whose
// one parameter is an enum of their names; it returns the skill's body.
// The tool is built once per set of enabled skills. Library.ServersFor
// tells package mcp which servers the turn's skills need, so that they
// are enabled for the turn too.
package skills
