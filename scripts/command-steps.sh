#!/usr/bin/env bash
# The sandbox's start as a gateway sees it: one worker process (embedded
# server, computer tools on) and the load program playing one agent that
# sends STEPS steps of run_command CMD one after another (each published
# when the previous one's step.done arrived), first with every command
# sandboxed (--command-sandbox bwrap, the default), then with
# --command-sandbox none; ROUNDS times, alternated, each a fresh worker.
# It prints each run's publish-to-step.done p50/p99 and, at the end, the
# medians of the p50s and of the sandboxed p50 over the unconfined one of
# the same round. WORKER=path runs a worker binary built elsewhere (for
# interleaved A/B runs against another commit); WFLAGS adds worker flags.
# Usage: scripts/command-steps.sh [steps] [rounds] [command]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-100}
rounds=${2:-3}
cmd=${3:-true}
dir=$(mktemp -d)
port=${PORT:-4334}
url=nats://127.0.0.1:$port
if [ -n "${WORKER:-}" ]; then cp "$WORKER" "$dir/worker"; else go build -o "$dir/worker" ./cmd/worker; fi
go build -o "$dir/loadgen" ./cmd/loadgen
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
one() { # $1: sandbox mode; prints the p50 and p99 in ms
	rm -rf "$dir/js" "$dir/homes"
	mkdir -p "$dir/homes"
	"$dir/worker" --listen 127.0.0.1:$port --monitor-port 0 --data-dir "$dir/js" --name steps --log-level warn \
		--computer-root "$dir/homes" --command-sandbox "$1" ${WFLAGS:-} 2>"$dir/worker-$1.log" &
	pid=$!
	# A first command makes the agent's home; it is not counted.
	for _ in $(seq 150); do "$dir/loadgen" --nats-url $url --steps 1 --concurrency 1 --command "$cmd" >/dev/null 2>&1 && break; sleep 0.2; done
	"$dir/loadgen" --nats-url $url --steps "$steps" --concurrency 1 --command "$cmd" >"$dir/out-$1"
	grep -q "call errors=0" "$dir/out-$1" || { cat "$dir/out-$1" "$dir/worker-$1.log" >&2; exit 1; }
	kill "$pid"
	wait "$pid" 2>/dev/null || true
	pid=
	ms() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" "$dir/out-$2" | awk '{d=$1; if (d ~ /µs$/) {sub(/µs$/,"",d); d/=1000} else if (d ~ /ms$/) sub(/ms$/,"",d); else if (d ~ /s$/) {sub(/s$/,"",d); d*=1000}; printf "%.2f", d}'; }
	echo "$(ms p50 "$1") $(ms p99 "$1")"
}
median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
: >"$dir/sb"
: >"$dir/none"
: >"$dir/over"
for r in $(seq "$rounds"); do
	read -r s50 s99 < <(one bwrap)
	read -r n50 n99 < <(one none)
	echo "round $r: sandboxed p50 ${s50} ms p99 ${s99} ms, unconfined p50 ${n50} ms p99 ${n99} ms, over $(awk -v a="$s50" -v b="$n50" 'BEGIN{printf "%.2f", a-b}') ms (load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "$s50" >>"$dir/sb"
	echo "$n50" >>"$dir/none"
	awk -v a="$s50" -v b="$n50" 'BEGIN{printf "%.2f\n", a-b}' >>"$dir/over"
done
echo "medians of $rounds rounds of $steps sequential run_command '$cmd' steps: sandboxed p50 $(median <"$dir/sb") ms, unconfined p50 $(median <"$dir/none") ms, over $(median <"$dir/over") ms"
