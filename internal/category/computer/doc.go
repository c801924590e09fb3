// Package computer provides the agent computer category: each agent's
// home directory on the worker and the tools that work in it, list_files,
// read_file, write_file, edit_file and run_command.
//
// The category is built once from a Config (New) and contributes its
// tools to main turns (context kind "text") that bind "computer"; task
// turns never get it. A tool learns whose home to use from the call
// (tool.CallFrom): the home of agent A is <Root>/A, created with mode
// 0700 the first time A needs it.
//
// Data flows like this:
//
//  1. Every path a file tool is given is resolved beneath the agent's
//     home through an os.Root opened on it, so no spelling of a path
//     ("..", an absolute path, a symbolic link pointing out) reaches a
//     file outside the home. An absolute path that names a place inside
//     the home is taken as relative to it, and "~/" means the home.
//  2. run_command runs "/bin/sh -c <command>" in the home, in a sandbox
//     of its own (Config.Sandbox, internal/sandbox), with an environment
//     built from nothing (PATH, HOME, LANG, TMPDIR inside the home, and
//     what Config.Env adds). Its
//     combined output streams into .outputs/<turn_id>.<step>.<call_id>.log
//     in the home (up to Config.MaxLogBytes; made at its first byte, so a
//     command that prints nothing leaves no file) while the head and the
//     tail are kept for the model. When the command ends, times out or is aborted,
//     the sandbox dies and the kernel kills everything in it.
//  3. Every result the model reads is cut to Config.OutputBudget: the
//     head and the tail are kept and a note says what was left out and
//     where the full text is. Structured facts (exit status, sizes, the
//     log's path) go in the result's details, never the full text.
//
// Both confinements are boundaries: the file tools' through os.Root, a
// command's through the sandbox, where only its own home and a private
// /tmp exist writable and nothing of the worker, other homes or the
// network does. Without a sandbox run_command is not offered, unless
// Config.Unconfined says so (the operator's --command-sandbox none):
// then a command runs in a process group of its own with the worker's
// user and reaches whatever that user can.
package computer
