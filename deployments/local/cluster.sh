#!/usr/bin/env bash
# Runs the three-node JetStream cluster of deployments/nats/cluster on this
# machine, in the background: n1, n2, n3 on client ports 4222-4224,
# monitoring 8222-8224, routes 6222-6224, all on 127.0.0.1.
#
#   deployments/local/cluster.sh up | down | status
#
# State (binary, stores, logs, pid files) is under $LOCAL_DIR
# (default ${TMPDIR:-/tmp}/turn-local). The users' passwords come from
# ADMIN_PASSWORD, GATEWAY_PASSWORD, WORKER_PASSWORD, RUNNER_PASSWORD and
# SYS_PASSWORD;
# unset ones get local-only defaults (<user>-local).
set -euo pipefail
cd "$(dirname "$0")/../.."

dir=${LOCAL_DIR:-${TMPDIR:-/tmp}/turn-local}
nodes=(n1 n2 n3)
routes=nats://127.0.0.1:6222,nats://127.0.0.1:6223,nats://127.0.0.1:6224

export ADMIN_PASSWORD=${ADMIN_PASSWORD:-admin-local}
export GATEWAY_PASSWORD=${GATEWAY_PASSWORD:-gateway-local}
export WORKER_PASSWORD=${WORKER_PASSWORD:-worker-local}
export RUNNER_PASSWORD=${RUNNER_PASSWORD:-runner-local}
export SYS_PASSWORD=${SYS_PASSWORD:-sys-local}

running() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  mkdir -p "$dir/logs" "$dir/conf/cluster"
  cp deployments/nats/accounts.conf "$dir/conf/accounts.conf"
  # The server of the version in go.mod (the one the tests run in process).
  echo "building nats-server (go.mod's version) into $dir/bin"
  go build -o "$dir/bin/nats-server" github.com/nats-io/nats-server/v2
  for i in 0 1 2; do
    n=${nodes[$i]}
    pid=$dir/$n.pid
    if running "$pid"; then
      echo "$n already running (pid $(cat "$pid"))"
      continue
    fi
    mkdir -p "$dir/$n"
    # The node's file with its store moved under $dir (the server refuses a
    # store_dir given both in the file and as a flag); flags move the listen
    # addresses and routes (the file's are the Compose host names n1..n3).
    sed "s|^\( *store_dir:\).*|\1 \"$dir/$n\"|" "deployments/nats/cluster/$n.conf" >"$dir/conf/cluster/$n.conf"
    nohup "$dir/bin/nats-server" -c "$dir/conf/cluster/$n.conf" \
      -a 127.0.0.1 -p $((4222 + i)) -m $((8222 + i)) \
      --cluster nats://127.0.0.1:$((6222 + i)) --routes "$routes" \
      >"$dir/logs/$n.log" 2>&1 &
    echo $! >"$pid"
    echo "$n started (pid $!), client nats://127.0.0.1:$((4222 + i)), monitoring http://127.0.0.1:$((8222 + i)), log $dir/logs/$n.log"
  done
  # Healthy means: JetStream is up and the meta group has a leader.
  for i in 0 1 2; do
    port=$((8222 + i))
    for _ in $(seq 150); do
      if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
        continue 2
      fi
      if ! running "$dir/${nodes[$i]}.pid"; then
        echo "${nodes[$i]} exited; its log:" >&2
        tail -n 30 "$dir/logs/${nodes[$i]}.log" >&2
        exit 1
      fi
      sleep 0.2
    done
    echo "${nodes[$i]} is not healthy after 30s; see $dir/logs/${nodes[$i]}.log" >&2
    exit 1
  done
  echo "cluster up: NATS_URL=nats://127.0.0.1:4222,nats://127.0.0.1:4223,nats://127.0.0.1:4224"
  echo "  nats --server \$NATS_URL --user admin --password \$ADMIN_PASSWORD stream report"
  echo "  nats --server \$NATS_URL --user sys --password \$SYS_PASSWORD server list"
}

down() {
  for n in "${nodes[@]}"; do
    pid=$dir/$n.pid
    if ! running "$pid"; then
      rm -f "$pid"
      continue
    fi
    p=$(cat "$pid")
    kill -TERM "$p"
    for _ in $(seq 100); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
      echo "$n (pid $p) did not stop in 10s; killing it" >&2
      kill -KILL "$p" 2>/dev/null || true
    fi
    rm -f "$pid"
    echo "$n stopped"
  done
  if [[ ${WIPE:-} == 1 ]]; then
    rm -rf "${dir:?}/n1" "${dir:?}/n2" "${dir:?}/n3"
    echo "stores removed"
  fi
}

status() {
  for n in "${nodes[@]}"; do
    if running "$dir/$n.pid"; then echo "$n running (pid $(cat "$dir/$n.pid"))"; else echo "$n stopped"; fi
  done
}

case ${1:-} in
  up) up ;;
  down) down ;;
  status) status ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
