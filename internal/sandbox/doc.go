// Package sandbox provides the jail run_command's commands run in: one
// shell command per bubblewrap (bwrap) sandbox, with limits, no network
// by default and, when the operator opts in, egress only through a proxy
// in the worker that applies the public-address policy of
// internal/netguard.
//
// Inside a sandbox:
//
//   - the file system is a fresh tmpfs root with /usr (and /bin, /sbin,
//     /lib* as the host has them) and a copy of an allowlist of /etc
//     entries made at New (one mount, not one per entry) bound
//     read-only, plus the operator's extra read-only paths; the agent's
//     home is bound read-write at its own absolute path (its parents are
//     empty directories), /tmp and /dev/shm are private tmpfs of bounded
//     size, /dev holds only null, zero, full, random, urandom and tty, and
//     /proc is the sandbox's own (read-only where the worker is not
//     root: see fsArgs). No other home, no homes' root, nothing
//     of the worker's files or credentials exists there;
//   - every namespace is new (user, pid, ipc, uts, net, cgroup); the
//     hostname is "sandbox"; all capabilities are dropped, NoNewPrivs is
//     set, nested user namespaces are refused (by a non-root worker's
//     bwrap; a root worker's commands can make them, gaining nothing
//     outside them); a seccomp filter (seccomp.go) fails every call that
//     sets an extended attribute with ENOTSUP, fallocate's allocating
//     modes with EOPNOTSUPP and io_uring with ENOSYS, so no home holds
//     what a quota count would have to follow;
//   - the environment is only what the caller gives; the worker raises
//     the sandbox's pid 1's oom_score_adj to 1000 (the command's
//     processes inherit it); the worker sets the niceness Nice on the sandbox's
//     pid 1 with the limits, so bwrap's own setup runs at the worker's
//     and everything of the command at Nice;
//   - limits are rlimits, set after the sandbox's user namespace exists,
//     so the process limit counts the sandbox's own processes (kernel
//     ucounts, 5.14 and later); see Limits for what each bounds. The
//     worker sets them with prlimit(2) on the sandbox's pid 1 while bwrap
//     holds it, its namespaces and mounts made, before the command starts
//     (--info-fd, --block-fd): no process of the chain sets them. A root
//     worker's command makes its user namespace below pid 1, so its
//     first shell sets the process limit itself; the worker checks that
//     it holds, in that shell's /proc limits, before the sandbox serves;
//   - with Config.Cgroups, each command has a cgroup of its own
//     (internal/cgroup) with Limits.Memory, Pids and CPU: bwrap is cloned
//     into it (v2), or the worker moves bwrap and the sandbox's pid 1
//     into it while pid 1 waits, before it starts the command (v1), so
//     every process of the command is born there and every byte it holds
//     (tmpfs pages, memfds, shared memory) is charged there; Run.End
//     kills what is left in it and removes it. Without cgroups New fits
//     the tmpfs sizes and RLIMIT_AS into Limits.Memory;
//   - the sandbox's pid 1 is bwrap's init: when the command's shell ends,
//     init exits and the kernel kills every process left in the pid
//     namespace. Killing the outer bwrap (timeout, cancel) kills init
//     (--die-with-parent), and the outer bwrap dies with the worker
//     (parent-death signal), so nothing survives the call.
//
// With cgroups (Config.Cgroups) and without Network, the commands of a
// home run one after another in its helper (helper.go): bwrap makes the
// home's sandbox once and its first shell forks each command inside it,
// so that a command costs a fork and the start of its shell, as an
// unconfined one does. Each command still has a cgroup of its own (the
// helper joins it before it forks the command, off the command's path),
// a /tmp and /dev/shm emptied of what the command before it left, no
// System V IPC object of an earlier command (the helper ends, and the
// next command gets a new sandbox), no process of an earlier command
// (the helper kills every process but itself and init after each, and
// the worker kills what is left in the command's cgroup and ends the
// sandbox when the home's cgroup holds anything but bwrap, its init and
// the helper) and no descriptor but its output. What the commands of a
// home share that separate sandboxes did not: the namespaces (the
// loopback's state, the hostname), the rlimits' hard ceilings and
// niceness set once on pid 1, and the helper, a process of the same user
// in the same pid namespace, which a command can signal (it then ends
// the sandbox) or, where ptrace is not restricted (Yama ptrace_scope 0),
// trace: a command that takes control of its home's helper can change
// what the home's later commands find (their /tmp, their reported
// status, processes the helper leaves in the home's cgroup until the
// next command's end is checked), never another home's, nor anything
// outside the sandbox. Commands of a home that overlap, a timed-out or
// cancelled command (its helper's sandbox is killed), Config.OneShot,
// no cgroups, or Network: a sandbox of its own per command, as below.
//
// A command's sandbox is made before the command when it can be (a
// spare, spare.go): when a command of a home ends, the sandbox for the
// home's next command is made in the background, at Nice, and waits for
// its command on a pipe; a home whose commands come faster than one is
// made keeps up to 8, within Config.Spares shared fairly between homes.
// A spare serves one command of its own home, once.
//
// When the worker runs as root, bwrap runs privileged (no user
// namespace) and the command drops to an unprivileged user (Config.UID)
// with setpriv before it starts, in a user namespace of its own made by
// unshare: the kernel never applies RLIMIT_NPROC to root, so a root
// command could not be held to a process limit. (bwrap cannot be started
// as that user instead: it resolves the home's path as its caller, and
// the root worker's homes' root and its parents are root's alone.)
//
// With Config.Network, the worker serves an HTTP proxy (forward and
// CONNECT) on a unix socket bound into the sandbox; socat inside listens
// on 127.0.0.1:3128 and forwards to it (the way Anthropic's
// sandbox-runtime bridges a net-less Linux sandbox), and HTTP_PROXY and
// its kin point there. The sandbox still has no network interface but
// loopback, so a direct connection has no route; the proxy refuses
// loopback, private, link-local (metadata) and other non-public targets
// unless the allow-list names them.
package sandbox
