// Package cgroup gives each sandboxed command a cgroup of its own beneath
// a subtree the worker may manage, so that every byte the command holds
// (its processes' memory, the pages of its /tmp and /dev/shm tmpfs, its
// memfds and shared memory: page cache is charged to the cgroup of the
// task that faults it in) is charged to the command and bounded there,
// never to the worker.
//
// Two layouts are supported:
//
//   - cgroup v2 (production): the worker's own cgroup is the delegated
//     subtree (systemd Delegate=, or a container with a private,
//     writable cgroup namespace). Open moves the worker's processes into
//     a leaf "worker" (the no-internal-process rule), enables memory,
//     pids and cpu for the children, sets memory.min on the leaf, and
//     each command is started directly inside its own child cgroup with
//     clone3(CLONE_INTO_CGROUP). memory.oom.group makes an out-of-memory
//     kill take the whole command; cgroup.kill ends it.
//   - cgroup v1 (hosts without v2, such as the development machine): the
//     memory controller is required, pids and cpu are used where their
//     hierarchy is writable; each command gets a child of the worker's
//     own cgroup in each, and its first process (a small shell) writes
//     its pid into the cgroup.procs files before it execs the sandbox.
//     Ending a command kills every pid its cgroup lists until none is
//     left.
//
// Group.Command starts any program in a group (an MCP server, say).
// When its command ends a group's processes get SIGKILL at once and the
// group is removed in the background, off the command's path, retried
// for a bounded time; Manager.Close waits for those removals. Groups left
// by a worker that died (their names carry its pid) are removed by the
// next Open.
package cgroup
