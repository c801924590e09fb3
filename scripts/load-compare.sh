#!/usr/bin/env bash
# Measures the worker beside raw JetStream on the same server, in one run:
# the load program against one worker process, then two, then
# `nats bench js pub async` and `nats bench js consume` (natscli v0.5.0).
# Each worker count gets two loads: no-op calls (CPU-bound: the server,
# the workers and the load program share the machine), and calls that
# sleep SLEEP (default 200ms; tool-bound: a worker's --concurrency is the
# limit, so a second worker adds its own).
# The summary also gives the op-mix bound of the same server, 1 / (1/consume
# + W/pub async) for W stored writes per step (the gateway's publish, the
# call key, call.output, step.done: 4 for a read-only call; 5 when the call
# is claimed before it runs and its outcome stored after; stored writes
# only: the step's removal from its work queue when acknowledged, the
# events' message-id checks, the two activity messages and the gateway's
# reading of both events are left out, so the bound errs high), the one
# worker's share of it, and the CPU per step of the worker process and of
# the load program in the one-worker run (on a machine they share, the
# bound is reached only when both leave the server the cores the bench
# had). WORKER=path runs a worker binary built elsewhere
# (for interleaved A/B runs against another commit), LOADGEN=path a load
# program built elsewhere; WFLAGS adds flags to
# the first worker (WFLAGS="--http-addr 127.0.0.1:9090 --pprof" to profile it).
# QUICK=1 runs only what the op-mix share needs (one worker, no-op calls,
# and the two nats bench runs, of BENCH_MSGS messages: default 200000).
# BENCH_MAXBYTES (1GB, the bench's own default) bounds the bench's stream:
# a smaller one lets the bench run where the disk has less than about
# 1.4 GB free (JetStream takes 75% of it), and does not change its rate
# as long as the messages fit.
# PORT (4333) is the embedded server's client port: two runs on one
# machine at once need two ports, or each measures the other's worker.
# Usage: scripts/load-compare.sh [steps] [concurrency]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20000}
conc=${2:-256}
dir=$(mktemp -d)
port=${PORT:-4333}
url=nats://127.0.0.1:$port
if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$dir/worker"; else go build -o "$dir/worker" ./cmd/worker; fi
if [ -n "${LOADGEN:-}" ]; then cp "$LOADGEN" "$dir/loadgen"; else go build -o "$dir/loadgen" ./cmd/loadgen; fi
"$dir/worker" --listen "127.0.0.1:$port" --monitor-port 0 --data-dir "$dir/js" --diagnostics --name w1 --log-level warn --concurrency "${WCONC:-256}" ${WFLAGS:-} 2>"$dir/w1.log" &
pids=($!)
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do
  kill -0 "${pids[0]}" 2>/dev/null || break
  nats -s $url micro ls >/dev/null 2>&1 && break
  sleep 0.2
done
# A worker that could not start (its port taken by another run) must not
# leave the run to measure whatever else answers there.
if ! kill -0 "${pids[0]}" 2>/dev/null; then
  echo "load-compare: the worker did not start (PORT=$port in use?):" >&2
  cat "$dir/w1.log" >&2
  exit 1
fi
sleepy() { "$dir/loadgen" --nats-url $url --steps "${SLEEP_STEPS:-6000}" --concurrency 1024 --sleep "${SLEEP:-200ms}"; }
# The worker process's CPU (its embedded server's included) and the load
# program's, per step of the one-worker run: where the machine's cores
# went, beside the rates.
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
echo "== one worker"
w0=$(cpu "${pids[0]}")
# (times, in the subshell: its children's CPU, the load program's)
("$dir/loadgen" --nats-url $url --steps "$steps" --concurrency "$conc" >"$dir/one"; times >"$dir/one.time")
cat "$dir/one"
w1=$(cpu "${pids[0]}")
if [ -z "${QUICK:-}" ]; then
  echo "== one worker, calls that sleep"
  sleepy | tee "$dir/one-sleep"
  "$dir/worker" --nats-url $url --diagnostics --name w2 --log-level warn --concurrency "${WCONC:-256}" 2>"$dir/w2.log" &
  pids+=($!)
  sleep 2
  echo "== two workers"
  "$dir/loadgen" --nats-url $url --steps "$steps" --concurrency "$conc" | tee "$dir/two"
  echo "== two workers, calls that sleep"
  sleepy | tee "$dir/two-sleep"
fi
bench_msgs=${BENCH_MSGS:-200000}
echo "== nats bench js pub async (512 B, file storage)"
nats -s $url bench js pub async bench.x --msgs "$bench_msgs" --size 512 --maxbytes "${BENCH_MAXBYTES:-1GB}" --create --storage file --purge --no-progress | tee "$dir/pub"
echo "== nats bench js consume"
nats -s $url bench js consume --msgs "$bench_msgs" --no-progress | tee "$dir/consume"
rate() { grep -o 'throughput=[0-9]*' "$dir/$1" | cut -d= -f2; }
msgs() { grep -o '[0-9,]* msgs/sec' "$dir/$1" | tr -d , | cut -d' ' -f1; }
consume=$(msgs consume)
echo "== summary (steps/s)"
two=""
if [ -z "${QUICK:-}" ]; then two=", two workers $(rate two)"; fi
echo "no-op calls:      one worker $(rate one) ($(awk -v a="$(rate one)" -v b="$consume" 'BEGIN{printf "%.1f", 100*a/b}')% of consume's $consume msgs/s; pub async $(msgs pub) msgs/s)$two"
if [ -z "${QUICK:-}" ]; then
  echo "calls that sleep: one worker $(rate one-sleep), two workers $(rate two-sleep)"
fi
hz=$(getconf CLK_TCK)
echo "CPU per step:     worker process $(awk -v t=$((w1 - w0)) -v hz="$hz" -v n="$steps" 'BEGIN{printf "%.1f", t*1e6/hz/n}') us, load program $(awk -v n="$steps" 'NR==2{gsub(/s/,""); split($1,u,"m"); split($2,y,"m"); printf "%.1f", (u[1]*60+u[2]+y[1]*60+y[2])*1e6/n}' "$dir/one.time") us (one worker, no-op calls)"
bound() { awk -v c="$consume" -v p="$(msgs pub)" -v w="$1" -v a="$(rate one)" 'BEGIN{b=1/(1/c+w/p); printf "%d writes: %.0f steps/s, one worker %.2f of it", w, b, a/b}'; }
echo "op-mix bound:     $(bound 4); $(bound 5)"
