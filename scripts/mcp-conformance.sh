#!/usr/bin/env bash
# Runs the official MCP conformance suite (npm @modelcontextprotocol/
# conformance) against the MCP door, on loopback: a worker with the suite's
# fixture tools (internal/mcpdoor/conformance/fixtureworker, cmd/worker
# with them added) on its embedded NATS server, and cmd/mcp-server serving
# a --dev-principal. Three runs, each against its own baseline of the
# scenarios that cannot pass, with the reasons, in conformance/:
#
#   0.1.16          server --suite active                 (2025-11-25 era)
#   0.2.0-alpha.12  server --spec-version 2026-07-28      (suite active)
#   0.2.0-alpha.12  server --suite all --spec-version 2026-07-28
#   0.2.0-alpha.12  server --requirements 2026-07-28       (adds the tasks-*
#                                                           extension scenarios)
#
# The suite fails a run on a scenario that fails and is not in the
# baseline, on a WARNING, and on a baseline entry that passes; this script
# also when the number of scenarios that fail is not the baseline's (the
# suite's check leaves out the extension scenarios). This script
# exits 1 when any run fails, after all have run, and prints the scenarios
# passed per run. Node 22 and the suites come from scripts/test-deps.sh
# ($MCP_CONFORMANCE_DIR).
#
#   scripts/mcp-conformance.sh [-v]     (-v: the suite's whole output)
set -euo pipefail
cd "$(dirname "$0")/.."

verbose=
[ "${1:-}" = "-v" ] && verbose=1

dir="${MCP_CONFORMANCE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolruntime/mcp-conformance}"
node="$dir/bin/node"
suite_0116="$dir/c0116/node_modules/@modelcontextprotocol/conformance/dist/index.js"
suite_a12="$dir/ca12/node_modules/@modelcontextprotocol/conformance/dist/index.js"
for f in "$node" "$suite_0116" "$suite_a12"; do
  if ! [ -e "$f" ]; then
    echo "mcp-conformance: $f is missing: run scripts/test-deps.sh" >&2
    exit 1
  fi
done

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
go build -o "$work/" ./internal/mcpdoor/conformance/fixtureworker ./cmd/mcp-server
echo "mcp-conformance: built the fixture worker and the door in $((SECONDS - start)) s"

# Ports of their own, so that nothing else on 4222 or 8471 answers; the
# worker must not join a NATS_URL of the environment.
unset NATS_URL
# Below 32768, where Linux starts its ephemeral ports (ip_local_port_range):
# a client's connection (the worker's own, to nats_port) once took
# door_port as its local port, and the door could not listen there.
nats_port=$((10000 + RANDOM % 20000))
door_port=$((nats_port + 1))
# The two input-required-result fixtures are held for a person's approval,
# which the door turns into input_required results (2026-07-28), and so is
# confirm_delete, which the tasks scenarios want parked in input_required.
"$work/fixtureworker" --data-dir "$work/js" --listen "127.0.0.1:$nats_port" --monitor-port 0 \
  --approval test_input_required_result_elicitation,test_input_required_result_tampered_state,confirm_delete \
  >"$work/worker.log" 2>&1 &
pids+=($!)
# The door connects once, at its start: the embedded server first.
for _ in $(seq 150); do
  (exec 3<>"/dev/tcp/127.0.0.1/$nats_port") 2>/dev/null && break
  sleep 0.2
done
"$work/mcp-server" --nats-url "nats://127.0.0.1:$nats_port" --listen "127.0.0.1:$door_port" \
  --dev-principal conformance --task-after 500ms --task-required failing_job,protocol_error_job \
  >"$work/door.log" 2>&1 &
pids+=($!)
url="http://127.0.0.1:$door_port/mcp"

# Ready when the door answers tools/list with the fixtures (the worker's
# catalog reply comes through it).
ready=
for _ in $(seq 150); do
  if curl -s -m 5 -X POST "$url" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'Mcp-Protocol-Version: 2025-11-25' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}' 2>/dev/null | grep -q test_simple_text; then
    ready=1
    break
  fi
  sleep 0.2
done
if [ -z "$ready" ]; then
  echo "mcp-conformance: the door did not list the fixture tools at $url" >&2
  echo "--- worker log:" >&2
  tail -n 40 "$work/worker.log" >&2
  echo "--- door log:" >&2
  tail -n 40 "$work/door.log" >&2
  exit 1
fi
echo "mcp-conformance: worker and door up in $((SECONDS - start)) s (door at $url)"

failed=0
summary=()
# run <label> <baseline> <suite.js> <arguments...>
run() {
  local label=$1 baseline=$2 suite=$3
  shift 3
  local out="$work/$label.txt" t0=$SECONDS rc=0
  "$node" "$suite" server --url "$url" --expected-failures "$baseline" "$@" >"$out" 2>&1 || rc=$?
  # One line per scenario, "✓ name: n passed, m failed" or "✗ …"; a
  # scenario with a WARNING shows ✓ there but is listed again under
  # "Expected failures" ("~ name") or "Unexpected failures" ("✗ name").
  local plain="$work/$label.plain" scenarios failed_n passed expected
  sed 's/\x1b\[[0-9;]*m//g' "$out" >"$plain"
  scenarios=$(grep -cE '^(✓|✗) ' "$plain" || true)
  failed_n=$({
    grep -E '^✗ ' "$plain" | sed -E 's/^✗ ([^:]+):.*/\1/'
    sed -n '/^\(Unexpected\|Expected\) failures/,/^$/p' "$plain" | grep -E '^ +(✗|~) ' | sed -E 's/^ +(✗|~) //'
  } | sort -u | grep -c . || true)
  passed=$((scenarios - failed_n))
  expected=$(grep -cE '^ +- ' "$baseline" || true)
  if [ -n "$verbose" ] || [ "$rc" -ne 0 ]; then
    cat "$out"
  fi
  local line="$label: $passed of $scenarios scenarios passed, $failed_n failed ($expected in the baseline), $((SECONDS - t0)) s"
  # The suite's own baseline check leaves out the extension scenarios
  # (tasks-*) it runs for --requirements: a failure there must not pass
  # unseen, so the count of failures must be the baseline's.
  if [ "$rc" -eq 0 ] && [ "$failed_n" -ne "$expected" ]; then
    cat "$out"
    rc=1
  fi
  if [ "$rc" -ne 0 ]; then
    line="$line: FAILED (exit $rc): see above"
    failed=1
  fi
  echo "mcp-conformance: $line"
  summary+=("$line")
}

run "0.1.16 --suite active" conformance/baseline-0.1.16.yml "$suite_0116" --suite active
run "0.2.0-alpha.12 --spec-version 2026-07-28" conformance/baseline-2026-07-28.yml "$suite_a12" \
  --spec-version 2026-07-28
run "0.2.0-alpha.12 --suite all --spec-version 2026-07-28" conformance/baseline-2026-07-28-all.yml "$suite_a12" \
  --suite all --spec-version 2026-07-28
run "0.2.0-alpha.12 --requirements 2026-07-28" conformance/baseline-2026-07-28-requirements.yml "$suite_a12" \
  --requirements 2026-07-28

echo "== MCP conformance, the door on the embedded default"
for s in "${summary[@]}"; do echo "-- $s"; done
if [ "$failed" -ne 0 ]; then
  echo "--- door log (last 40 lines):" >&2
  tail -n 40 "$work/door.log" >&2
  exit 1
fi
