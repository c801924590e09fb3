#!/bin/sh
# cgroup-init: the computer image's entrypoint. It delegates a cgroup v2
# subtree to the worker's user, so that each command runs in a cgroup of
# its own (memory, pids, cpu: internal/cgroup), then drops root and every
# capability and execs its arguments (tini, then the worker).
#
# Run as root (Compose: user "0:0", cap_add SYS_ADMIN, cgroup: private;
# Kubernetes: runAsUser 0 and SYS_ADMIN in the pod's own user namespace,
# hostUsers: false) in a private cgroup namespace, it:
#   1. remounts the container's /sys/fs/cgroup read-write (runtimes mount
#      it read-only for unprivileged containers);
#   2. moves itself into the leaf /worker (no process may stay in a cgroup
#      whose controllers are enabled for children) and enables memory,
#      pids and cpu for the children of the namespace's root;
#   3. gives /worker (and its cgroup.procs, cgroup.subtree_control,
#      cgroup.threads) to WORKER_UID (65532);
#   4. execs "$@" as WORKER_UID with no capabilities left and NoNewPrivs.
# It needs CAP_SYS_ADMIN (the remount), CHOWN, and SETUID, SETGID,
# SETPCAP (setpriv); all of them end with it.
# Run as any other user, or where a step fails, it says so in one line
# and execs "$@" unchanged: the worker then says at start that commands
# have no cgroup of their own.
set -u
uid=${WORKER_UID:-65532}
cg=${CGROUP_INIT_ROOT:-/sys/fs/cgroup}
if [ "$(id -u)" != 0 ]; then
  exec "$@"
fi
delegate() {
  [ -f "$cg/cgroup.controllers" ] || { echo "$cg is not cgroup v2"; return 1; }
  [ -w "$cg/cgroup.procs" ] || mount -o remount,rw "$cg" || { echo "cannot remount $cg read-write (needs CAP_SYS_ADMIN)"; return 1; }
  mkdir -p "$cg/worker" && echo $$ >"$cg/worker/cgroup.procs" || { echo "cannot move to $cg/worker"; return 1; }
  for c in memory pids cpu; do
    echo "+$c" >"$cg/cgroup.subtree_control" 2>/dev/null || echo "cgroup-init: controller $c not enabled"
  done
  chown "$uid:$uid" "$cg/worker" "$cg/worker/cgroup.procs" "$cg/worker/cgroup.subtree_control" "$cg/worker/cgroup.threads" ||
    { echo "cannot give $cg/worker to uid $uid"; return 1; }
}
# $$ is this shell's pid in the subshell too: it is what moves.
if why=$(delegate 2>&1); then
  [ -z "$why" ] || echo "$why" | tr '\n' ' ' >&2
else
  echo "cgroup-init: no cgroup delegated to the worker ($(echo "$why" | tr '\n' ' ')); commands get rlimits only" >&2
fi
exec setpriv --reuid="$uid" --regid="$uid" --clear-groups --no-new-privs --inh-caps=-all --ambient-caps=-all --bounding-set=-all -- "$@"
