// Package procguard provides what keeps the worker process itself out of
// reach of the commands and tools it runs: no inherited descriptors, an
// init that reaps orphans when the worker is PID 1, and a hardening step
// that forgets credentials and makes the process non-dumpable.
//
// A program calls CloseOnExec and Init first thing in main, then Harden
// once its flags and environment are read:
//
//  0. CloseOnExec marks every descriptor above 2 close-on-exec: those the
//     program's parent (a supervisor, a wrapper script) left open would
//     otherwise reach every command and MCP server it starts.
//  1. Init returns at once unless the process is PID 1 (a container without
//     an init). As PID 1 it becomes a tiny init instead: it starts the same
//     program again as its only child, forwards the usual termination
//     signals to it, reaps every process that ends up its child (orphans
//     of commands included) with wait4(-1), and exits with the child's
//     status. The re-exec keeps the reaping loop and os/exec's own waits in
//     different processes, so the loop never steals a wait the worker's
//     code is blocked on.
//  2. Harden removes the named variables from the environment (so no
//     child inherits them) and overwrites their values in the process's
//     initial environment block (what /proc/<pid>/environ shows, which
//     Unsetenv does not change), then sets PR_SET_DUMPABLE to 0: the
//     kernel then makes /proc/<pid>/environ, mem, maps, fd/ and the like
//     root's and refuses ptrace, so another process of the same user can
//     read neither the environment nor the memory of the worker.
//
// Arguments are not overwritten: Go's os.Args share the memory of the
// initial argument block, so a secret given as a flag would change under
// the flag's own variable. Credentials belong in the environment or in
// files, never on the command line.
package procguard
