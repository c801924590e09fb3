#!/usr/bin/env bash
# Prints issue 39's three ratios on this machine, each the median of RUNS
# (3) short runs, with the load average beside each run. Printed, never
# asserted: figures of a shared machine vary from run to run.
#   - dispatcher: ours / Eino's ToolsNode per 8-call step (bench/eino,
#     each benchmark a process of its own, the two alternated);
#   - one worker / the 5-write op-mix bound of the same server
#     (QUICK=1 scripts/load-compare.sh STEPS 512; STEPS 30000 and
#     BENCH_MSGS 200000 by default, the shape of the judged command:
#     runs of 5,000 steps and 50,000 messages spend a larger part on
#     start-up, and gave lower shares on the same binary);
#   - heap per call in flight, 8,192 calls of 5 s (bench/inflight; a run
#     that did not have all of them in flight at once says so).
# Usage: scripts/ratios.sh (RUNS, STEPS, BENCHTIME, BENCH_MSGS to tune)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go build -o "$dir/loadgen" ./cmd/loadgen
go build -o "$dir/worker" ./cmd/worker
go build -o "$dir/inflight" ./bench/inflight
(cd bench/eino && go test -c -o "$dir/eino.test" .)
load() { cut -d' ' -f1 /proc/loadavg; }
median() { sort -g | awk '{a[NR]=$1} END{if (NR == 0) print "n/a"; else print a[int((NR+1)/2)]}'; }
# bench runs one benchmark in a process of its own: its ns/op (wall), and
# the process's CPU seconds (user + system), which a loaded machine
# disturbs less, less those of the same process running one step (its
# start: the packages' initialisation, some 0.1 s, a third of the
# dispatcher's run), so that the CPU ratio is one of the steps alone.
bench() {
  local TIMEFORMAT='%U %S'
  { time "$dir/eino.test" -test.run '^$' -test.bench "$1" -test.benchtime "${BENCHTIME:-20000x}" >"$dir/b.out"; } 2>"$dir/b.cpu"
  { time "$dir/eino.test" -test.run '^$' -test.bench "$1" -test.benchtime 1x >/dev/null; } 2>"$dir/b.start"
  echo "$(awk '/ns\/op/{print $3}' "$dir/b.out") $(awk -v s="$(awk '{print $1 + $2}' "$dir/b.start")" '{c = $1 + $2 - s; printf "%.3f", (c > 0.001 ? c : 0.001)}' "$dir/b.cpu")"
}

for i in $(seq "$runs"); do
  read -r ours ours_cpu < <(bench 'RuntimeDispatch8$')
  read -r eino eino_cpu < <(bench 'EinoToolsNode8$')
  r=$(awk -v a="$ours" -v b="$eino" 'BEGIN{printf "%.3f", a/b}')
  rc=$(awk -v a="$ours_cpu" -v b="$eino_cpu" 'BEGIN{printf "%.3f", a/b}')
  echo "$r" >>"$dir/dispatch"
  echo "$rc" >>"$dir/dispatch-cpu"
  echo "dispatcher run $i (load $(load)): ours $ours ns, Eino $eino ns per 8-call step: $r x (CPU past start-up $ours_cpu s / $eino_cpu s: $rc x)"
done

for i in $(seq "$runs"); do
  if WORKER="$dir/worker" LOADGEN="$dir/loadgen" QUICK=1 BENCH_MSGS="${BENCH_MSGS:-200000}" scripts/load-compare.sh "${STEPS:-30000}" 512 >"$dir/lc" 2>&1; then
    share=$(grep -o '5 writes: [0-9]* steps/s, one worker [0-9.]*' "$dir/lc" | awk '{print $NF}')
    echo "$share" >>"$dir/worker-share"
    echo "one worker run $i (load $(load)): $(grep '^no-op calls' "$dir/lc" | sed 's/ *(.*//;s/no-op calls: *//') no-op steps/s, $(grep -o '5 writes: [0-9]* steps/s' "$dir/lc"), share $share"
  else
    echo "one worker run $i failed:"
    tail -5 "$dir/lc"
  fi
done

for i in $(seq "$runs"); do
  if "$dir/inflight" --loadgen "$dir/loadgen" >"$dir/if" 2>&1; then
    kib=$(grep -o "per call in flight: heap [0-9]* B" "$dir/if" | awk "{printf \"%.2f\", \$(NF-1)/1024}")
    if all=$(grep -o 'at most [0-9]* of the [0-9]* calls' "$dir/if"); then
      # Fewer calls share the fixed costs: not the figure, left out.
      echo "heap per call in flight run $i (load $(load)): $kib KiB, left out of the median ($all in flight at once)"
    else
      echo "heap per call in flight run $i (load $(load)): $kib KiB (all calls in flight at once)"
      echo "$kib" >>"$dir/heap"
    fi
  else
    echo "heap per call in flight run $i failed:"
    tail -5 "$dir/if"
  fi
done

echo "medians of $runs: dispatcher $(median <"$dir/dispatch" 2>/dev/null || echo n/a) x Eino (CPU $(median <"$dir/dispatch-cpu" 2>/dev/null || echo n/a) x; goal <= 0.2)," \
  "one worker $(median <"$dir/worker-share" 2>/dev/null || echo n/a) of the op-mix bound (goal >= 0.95)," \
  "heap $(median <"$dir/heap" 2>/dev/null || echo n/a) KiB per call in flight, of the runs with all in flight (goal <= 4)"
