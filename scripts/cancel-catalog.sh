#!/usr/bin/env bash
# Issue 23's cancel and catalog checks, out of process: one worker process
# of default settings on its embedded server (--diagnostics, and an MCP
# config naming one server, "slow", whose start takes MCP_DELAY seconds,
# 12 by default: `sh -c 'sleep 12; exec mcp-server-filesystem DIR'`), and
# three loadgen runs against it:
#   --cancel-storm 30000   a user's running sleep call cancelled behind
#                          30,000 cancels of other turns: the latency
#   --cancel-pending 150   150 steps held for approval cancelled at once
#                          with 900 KiB reasons: every one decided
#   --catalog-slow slow    one agent's catalog enables "slow" while 8
#                          agents ask for theirs back to back: their latency
# then counts "slow consumer" in the worker's log and the server's
# slow_consumers (/varz). A fresh worker per run: the slow server, once
# started, is shared by later turns. Needs MCP_NPM_DIR (the npm packages
# of the MCP tests), else npx fetches the server. WORKER=path runs a worker
# binary built elsewhere; PORT its client port (default: one at random,
# monitoring on PORT+1).
# Usage: scripts/cancel-catalog.sh [runs]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-1}
dir=$(mktemp -d)
port=${PORT:-$((10000 + RANDOM % 20000))} mport=$((port + 1))
url=nats://127.0.0.1:$port
if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$dir/worker"; else go build -o "$dir/worker" ./cmd/worker; fi
go build -o "$dir/loadgen" ./cmd/loadgen
server="npx -y @modelcontextprotocol/server-filesystem"
if [ -n "${MCP_NPM_DIR:-}" ]; then server="$MCP_NPM_DIR/node_modules/.bin/mcp-server-filesystem"; fi
mkdir -p "$dir/files"
cat >"$dir/mcp.json" <<EOF
{"servers": {"slow": {"command": "sh", "args": ["-c", "sleep ${MCP_DELAY:-12}; exec $server $dir/files"], "defer": false}}}
EOF
pid=
ok=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; if [ -n "$ok" ]; then rm -rf "$dir"; else echo "worker log kept: $dir/w.log"; fi' EXIT
for r in $(seq "$runs"); do
	rm -rf "$dir/js"
	"$dir/worker" --diagnostics --listen 127.0.0.1:$port --monitor-port $mport --data-dir "$dir/js" --mcp-config "$dir/mcp.json" 2>"$dir/w.log" &
	pid=$!
	for _ in $(seq 150); do grep -q 'msg="worker running"' "$dir/w.log" && break; sleep 0.2; done
	grep -q 'msg="worker running"' "$dir/w.log" || { cat "$dir/w.log"; exit 1; }
	echo "== run $r, $(date -u +%FT%TZ), load average $(cut -d' ' -f1-3 /proc/loadavg)"
	"$dir/loadgen" --nats-url $url --cancel-storm 30000
	"$dir/loadgen" --nats-url $url --cancel-pending 150
	"$dir/loadgen" --nats-url $url --catalog-slow slow
	echo "worker log lines with \"slow consumer\": $(grep -ci 'slow consumer' "$dir/w.log" || true); server $(curl -s "http://127.0.0.1:$mport/varz" | grep -o '"slow_consumers": *[0-9]*')"
	echo "worker log lines at WARN or ERROR, by message:"
	grep -o 'level=\(WARN\|ERROR\) msg="[^"]\{0,80\}' "$dir/w.log" | sort | uniq -c || true
	kill "$pid"; wait "$pid" || true; pid=
done
ok=1
