#!/usr/bin/env bash
# Runs N workers (default 3) against the local cluster of cluster.sh, in the
# background, with replicas 3 and the worker user.
#
#   deployments/local/workers.sh up [N] | down | status
#
# Worker i's metrics and health endpoints are on 127.0.0.1:909<i>
# (WORKER_HTTP_ADDR). Extra worker flags go in WORKER_ARGS, e.g.
# WORKER_ARGS=--diagnostics. State is under $LOCAL_DIR as for cluster.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=${LOCAL_DIR:-${TMPDIR:-/tmp}/turn-local}
url=${NATS_URL:-nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224}
password=${WORKER_PASSWORD:-worker-local}

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  local n=${1:-3}
  mkdir -p "$dir/logs" "$dir/bin"
  echo "building the worker into $dir/bin"
  go build -ldflags "-X main.version=0.0.0-local" -o "$dir/bin/toolruntime-worker" ./cmd/worker
  for i in $(seq 1 "$n"); do
    start "$i"
    if [[ $i == 1 ]]; then
      # The first worker creates the streams, consumers and buckets; the
      # others start once it runs. (Several workers setting up a fresh R3
      # cluster at the same moment can time out; one that fails that way
      # succeeds when started again.)
      ready 1 60
    fi
  done
  for i in $(seq 2 "$n"); do
    ready "$i" 30
  done
}

start() {
  local i=$1 pid=$dir/worker-$1.pid
  if running "$pid"; then
    echo "worker-$i already running (pid $(cat "$pid"))"
    return
  fi
  # The password goes in the environment (WORKER_PASSWORD), not on the
  # command line where ps shows it.
  # shellcheck disable=SC2086
  WORKER_PASSWORD=$password WORKER_HTTP_ADDR=127.0.0.1:$((9090 + i)) \
    nohup "$dir/bin/toolruntime-worker" --nats-url "$url" --replicas 3 --user worker \
    --name "worker-$i" ${WORKER_ARGS:-} >"$dir/logs/worker-$i.log" 2>&1 &
  echo $! >"$pid"
  echo "worker-$i started (pid $!), http://127.0.0.1:$((9090 + i)), log $dir/logs/worker-$i.log"
}

# ready <i> <seconds> waits for worker i's "worker running" log line.
ready() {
  local i=$1 log=$dir/logs/worker-$1.log
  for _ in $(seq $(($2 * 5))); do
    grep -q '"worker running"\|msg="worker running"' "$log" 2>/dev/null && return 0
    if ! running "$dir/worker-$i.pid"; then
      echo "worker-$i exited; its log:" >&2
      tail -n 20 "$log" >&2
      exit 1
    fi
    sleep 0.2
  done
  echo "worker-$i is not running after $2s; see $log" >&2
  exit 1
}

down() {
  shopt -s nullglob
  for pid in "$dir"/worker-*.pid; do
    name=$(basename "$pid" .pid)
    if ! running "$pid"; then
      rm -f "$pid"
      continue
    fi
    p=$(cat "$pid")
    # SIGTERM: the worker stops pulling and lets running steps finish
    # (--grace, 30s by default).
    kill -TERM "$p"
    for _ in $(seq 400); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
      echo "$name (pid $p) did not stop in 40s; killing it" >&2
      kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$pid"
    echo "$name stopped"
  done
}

status() {
  shopt -s nullglob
  for pid in "$dir"/worker-*.pid; do
    name=$(basename "$pid" .pid)
    if running "$pid"; then echo "$name running (pid $(cat "$pid"))"; else echo "$name stopped"; fi
  done
}

case ${1:-} in
  up) up "${2:-3}" ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up [N]|down|status" >&2; exit 2 ;;
esac
