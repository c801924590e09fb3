#!/usr/bin/env bash
# Runs the commands of README.md and docs/*.md (internal/engine's
# TestDocsCommandsRunInCI fails when one of them is not here): the NATS CLI
# commands against a worker started the README's way (go run ./cmd/worker,
# embedded server), checking what they print, and every program the docs
# start for a long while with --help, so that its flags still parse. Needs
# `nats` on PATH (.ci/run installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

data=$(mktemp -d)
log=$(mktemp)
go build -o "$data/worker" ./cmd/worker
# A port of its own, so that another server on 4222 cannot answer instead;
# the README's commands reach it through NATS_URL.
# (Exported only after the worker starts: the worker reads NATS_URL too,
# and would join that server instead of starting its own.)
port=$((10000 + RANDOM % 20000))
unset NATS_URL
mkdir -p "$data/marks"
"$data/worker" --diagnostics --mark-dir "$data/marks" --approval mark --data-dir "$data/js" --listen 127.0.0.1:$port --monitor-port 0 >"$log" 2>&1 &
pid=$!
export NATS_URL=nats://127.0.0.1:$port
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data" "$log"' EXIT
for _ in $(seq 100); do
  nats micro ls >/dev/null 2>&1 && break
  sleep 0.2
done

expect() { # expect <what> <pattern> <output>
  if ! grep -q -- "$2" <<<"$3"; then
    echo "cli-smoke: $1: expected to see '$2' in:" >&2
    echo "$3" >&2
    echo "--- worker log:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo "cli-smoke: $1: ok"
}

# --- The README's tour, in its order. ---
out=$(nats micro ls)
expect "micro ls" "turn-worker" "$out"
out=$(nats micro info turn-worker)
expect "micro info" "turn.tools" "$out"
expect "micro info" "protocol: 1.3" "$out"
out=$(nats req turn.tools '{"agent_id":"a1","turn_id":"t1","context":{"kind":"text","bindings":{"diagnostics":true}}}')
expect "catalog request" '"digest"' "$out"
expect "catalog request" '"name":"ping"' "$out"
out=$(nats pub --jetstream turn.call.a1.t1 -H Nats-Msg-Id:a1.t1.0 '{"agent_id":"a1","turn_id":"t1","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"call_1","name":"ping","arguments":"{\"note\":\"hi\"}"}]}' 2>&1)
expect "publish a step" "TURN_CALLS" "$out"
out=$(nats sub --stream TURN_OUTPUTS 'turn.call.output.a1.t1' --all --count 2 --raw)
expect "watch the events" '"type":"call.output"' "$out"
expect "watch the events" 'pong hi' "$out"
expect "watch the events" '"type":"step.done"' "$out"
progress=$(mktemp)
{ nats sub 'turn.activity.a1.tp' --count 3 --raw & } >"$progress" 2>&1
sub=$!
sleep 1 # the subscription is up: activity is not stored
nats pub --jetstream turn.call.a1.tp -H Nats-Msg-Id:a1.tp.0 '{"agent_id":"a1","turn_id":"tp","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"call_1","name":"sleep","arguments":"{\"ms\":2000}"}]}' >/dev/null 2>&1
wait $sub
out=$(cat "$progress"); rm -f "$progress"
expect "watch progress" '"state":"started"' "$out"
expect "watch progress" '"state":"progress","label":"Waited ' "$out"
out=$(nats stream report)
expect "stream report" "TURN_OUTPUTS" "$out"
out=$(nats consumer report TURN_CALLS)
expect "consumer report" "turn-workers" "$out"
out=$(nats stream subjects TURN_BACKLOG)
expect "backlog subjects" "No subjects found" "$out" # nothing waits for its share here
out=$(nats stream info TURN_BACKLOG)
expect "backlog stream" "turn.backlog." "$out"
out=$(nats kv ls TURN_STATE)
expect "kv ls" "call.a1.t1.0" "$out"
out=$(nats kv get TURN_STATE "call.a1.t1.0.Y2FsbF8x" --raw)
expect "kv get" '"state":"done"' "$out"
out=$(nats micro stats turn-worker)
expect "micro stats" "tools" "$out"
nats pub --jetstream turn.call.a1.t2 'this is not a step' >/dev/null 2>&1
sleep 1
out=$(nats stream get TURN_DEAD --last-for turn.dead.a1.t2)
expect "dead letters" "Dead-Reason: malformed step: not a JSON step object" "$out"
out=$(nats pub --jetstream turn.call.a1.t3 -H Nats-Msg-Id:a1.t3.0 '{"agent_id":"a1","turn_id":"t3","step":0,"context":{"kind":"text","bindings":{"diagnostics":true}},"output":[{"type":"function_call","call_id":"call_1","name":"mark","arguments":"{\"label\":\"deploy\"}"}]}' 2>&1)
expect "publish a step needing approval" "TURN_CALLS" "$out"
out=$(nats sub --stream TURN_OUTPUTS 'turn.call.output.a1.t3' --all --count 1 --raw)
expect "step.pending" '"type":"step.pending"' "$out"
expect "step.pending" '"arguments":{"label":"deploy"}' "$out"
expect "step.pending" '"expires_at"' "$out"
if [ -s "$data/marks/marks.log" ]; then
  echo "cli-smoke: a call held for approval ran before it was approved" >&2
  exit 1
fi
out=$(nats pub --jetstream turn.approval.a1.t3 -H Nats-Msg-Id:a1.t3.0.approval '{"agent_id":"a1","turn_id":"t3","step":0,"decisions":[{"call_id":"call_1","approved":true}]}' 2>&1)
expect "publish an approval" "TURN_APPROVALS" "$out"
out=$(nats sub --stream TURN_OUTPUTS 'turn.call.output.a1.t3' --all --count 3 --raw)
expect "approved outputs" '"type":"call.output"' "$out"
expect "approved outputs" 'marked deploy' "$out"
expect "approved outputs" '"type":"step.done"' "$out"
out=$(cat "$data/marks/marks.log")
expect "the approved call ran once" "^deploy$" "$out"
[ "$(wc -l <"$data/marks/marks.log")" -eq 1 ] || { echo "cli-smoke: the approved call ran more than once" >&2; exit 1; }
out=$(nats kv get TURN_STATE approval.a1.t3.0 --raw)
expect "pending step record" '"state":"done"' "$out"


# --- docs/mcp-server.md: the MCP door on the first worker, with a
# principal whose token is hashed the docs' way; one tools/list and one
# tools/call with curl, as a 2025-11-25 client sends them. ---
go build -o "$data/mcp-server" ./cmd/mcp-server
(cd "$data" && openssl rand -hex 32 >seal.key)
TOKEN=smoke-token-0123456789
hash=$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)
printf '{"principals":[{"name":"smoke","token_sha256":["%s"],"agent_id":"smoke","bindings":{"diagnostics":true}}]}' "$hash" >"$data/principals.json"
dport=$((port + 2))
"$data/mcp-server" --nats-url "nats://127.0.0.1:$port" --principals "$data/principals.json" --seal-key-file "$data/seal.key" --listen 127.0.0.1:$dport >>"$log" 2>&1 &
pid3=$!
trap 'kill $pid $pid3 2>/dev/null || true; wait $pid $pid3 2>/dev/null || true; rm -rf "$data" "$log"' EXIT
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$dport/mcp" && break
  sleep 0.2
done
door() { # door <token> <JSON-RPC request>
  curl -s -i -X POST "http://127.0.0.1:$dport/mcp" -H "Authorization: Bearer $1" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2025-11-25' -d "$2"
}
out=$(door wrong-token '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
expect "door refuses a wrong token" 'Bearer resource_metadata="http://127.0.0.1:'"$dport"'/.well-known/oauth-protected-resource/mcp"' "$out"
out=$(door "$TOKEN" '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}')
expect "door tools/list" '"name":"ping"' "$out"
expect "door tools/list" '"cacheScope":"private"' "$out"
out=$(door "$TOKEN" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ping","arguments":{"note":"door"},"_meta":{"io.agentbull.toolruntime/turn":"smoke"}}}')
expect "door tools/call" 'pong door' "$out"
out=$(nats kv get MCP_DOOR step.smoke.smoke --raw)
expect "door step counter" '^0$' "$out"
kill $pid3
wait $pid3 2>/dev/null || true

# --- docs/tools.md, "Call the tool you wrote": examples/custom-tool, its own
# worker and server. ---
go build -o "$data/custom-tool" ./examples/custom-tool
port2=$((port + 1))
# Without NATS_URL (exported above), or it would join the first server.
env -u NATS_URL "$data/custom-tool" --data-dir "$data/js2" --listen 127.0.0.1:$port2 --monitor-port 0 >>"$log" 2>&1 &
pid2=$!
trap 'kill $pid $pid2 2>/dev/null || true; wait $pid $pid2 2>/dev/null || true; rm -rf "$data" "$log"' EXIT
export NATS_URL=nats://127.0.0.1:$port2
for _ in $(seq 100); do
  nats micro ls >/dev/null 2>&1 && break
  sleep 0.2
done
out=$(nats req turn.tools '{"agent_id":"a1","turn_id":"w1","context":{"kind":"text","bindings":{"text_tools":true}}}')
expect "custom tool catalog" '"name":"count_words"' "$out"
out=$(nats pub --jetstream turn.call.a1.w1 -H Nats-Msg-Id:a1.w1.0 '{"agent_id":"a1","turn_id":"w1","step":0,"context":{"kind":"text","bindings":{"text_tools":true}},"output":[{"type":"function_call","call_id":"call_1","name":"count_words","arguments":"{\"text\":\"to be or not to be\"}"}]}' 2>&1)
expect "custom tool step" "TURN_CALLS" "$out"
out=$(nats sub --stream TURN_OUTPUTS 'turn.call.output.a1.w1' --all --count 2 --raw)
expect "custom tool output" '"type":"call.output"' "$out"
expect "custom tool output" '"name":"count_words"' "$out"
expect "custom tool output" '6 words' "$out"
expect "custom tool output" '"type":"step.done"' "$out"

# --- Programs the docs start for a long while: built once each, run with
# the docs' arguments and --help (before an argument holding a space, the
# message after the flags), which parses every flag, prints the usage and
# exits. A flag renamed or removed fails here. ---
mkdir -p "$data/bin"
cp "$data/worker" "$data/bin/worker"
parses() { # parses <a command as the docs write it>
  local cmd=$1 words=() args=() w bin placed="" out
  eval "words=($cmd)"
  while [[ ${words[0]} == *=* ]]; do words=("${words[@]:1}"); done # VAR=value
  if [[ ${words[0]} != go || ${words[1]} != run ]]; then
    echo "cli-smoke: not a go run command: $cmd" >&2
    exit 1
  fi
  bin="$data/bin/$(basename "${words[2]}")"
  [ -x "$bin" ] || go build -o "$bin" "${words[2]}"
  for w in "${words[@]:3}"; do
    if [[ -z $placed && $w == *" "* ]]; then args+=(--help); placed=1; fi
    args+=("$w")
  done
  [ -n "$placed" ] || args+=(--help)
  out=$(env -u NATS_URL "$bin" "${args[@]}" 2>&1 </dev/null) || true
  if ! grep -qi 'usage' <<<"$out" || grep -qE 'flag provided but not defined|invalid value|invalid boolean|unexpected arguments' <<<"$out"; then
    echo "cli-smoke: $cmd: its flags do not parse:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "cli-smoke: flags parse: $cmd"
}
# README.md
parses 'go run ./cmd/worker'
parses 'GOFLAGS=-v go run ./cmd/worker'
parses 'go run ./cmd/worker --diagnostics --mark-dir /tmp/marks --approval mark'
# docs/gateway.md
parses 'go run ./cmd/worker --diagnostics'
parses 'OPENAI_API_KEY=sk-… go run ./cmd/agent --model gpt-5.1 --bind diagnostics --tasks -v "Ping twice, then say what you did."'
# docs/operations.md
parses 'go run ./cmd/console --nats-url nats://127.0.0.1:4222'
# README.md, docs/mcp-server.md
parses 'go run ./cmd/mcp-server --dev-principal dev'
parses 'go run ./cmd/mcp-server --principals principals.json --seal-key-file seal.key --listen 0.0.0.0:8471 --allowed-hosts mcp.example.com --resource https://mcp.example.com/mcp'
# docs/benchmarks.md
parses 'go run ./cmd/chaos --duration 2m --workers 2 --fault-every 10s'
parses 'go run ./cmd/loadgen --workers 1 --steps 20000 --concurrency 256'
parses 'go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --steps 20000'
parses 'go run ./cmd/loadgen --workers 1 --burst 20000 --shares 4000'
parses 'go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --burst 20000 --shares 4000'
parses 'go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --cancel-storm 30000'
parses 'go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --cancel-pending 150'
parses 'go run ./cmd/loadgen --nats-url nats://127.0.0.1:4222 --catalog-slow slow'

# --- The README's short commands. ---
go mod download -x
mkdir -p /tmp/marks
echo "cli-smoke: go mod download, mkdir: ok"

# --- docs/configuration.md names every flag of the worker's --help, and
# no flag that neither the worker nor the console has. ---
flags_of() { "$1" --help 2>&1 | grep -oE '^  -[a-z0-9-]+' | sed 's/^  -//' | sort -u; }
worker_flags=$(flags_of "$data/worker")
known=$(printf '%s\n%s\nhelp\n' "$worker_flags" "$(flags_of "$data/bin/console")")
for f in $worker_flags; do
  grep -q -- "\`--$f\`" docs/configuration.md || { echo "cli-smoke: docs/configuration.md does not name the worker's --$f" >&2; exit 1; }
done
for f in $(grep -oE '`--[a-z0-9-]+' docs/configuration.md | sed 's/^`--//' | sort -u); do
  grep -qx -- "$f" <<<"$known" || { echo "cli-smoke: docs/configuration.md names --$f, which neither the worker nor the console has" >&2; exit 1; }
done
echo "cli-smoke: docs/configuration.md: the worker's $(wc -w <<<"$worker_flags") flags: ok"
echo "cli-smoke: all the docs' commands ran"
