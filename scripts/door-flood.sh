#!/usr/bin/env bash
# Issue 36's flood figure: one principal sends COUNT requests to the MCP
# door (tools/call of a cheap tool in both protocol eras, tools/list,
# malformed JSON, no method, bodies over the bound) from CONNS
# connections while another principal calls a cheap tool one call after
# another; the door, an embedded NATS server and a real worker run in one
# process on loopback. It prints the quiet principal's p99 idle and under
# the flood, measured in interleaved rounds, and their ratio (the goal is
# 2 x). The figure is printed, not asserted: the test
# TestOnePrincipalsFloodLeavesAnotherAlone asserts its own bound on its
# default flood. KEEPALIVE=0 opens a connection per flood request.
# Usage: scripts/door-flood.sh [count] [conns]
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-10000}
conns=${2:-32}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! MCPDOOR_FLOOD="$count" MCPDOOR_FLOOD_CONNS="$conns" MCPDOOR_FLOOD_KEEPALIVE="${KEEPALIVE:-1}" \
	MCPDOOR_FLOOD_FIGURE=1 MCPDOOR_FLOOD_MAX=1000000 \
	go test -count=1 -v -run '^TestOnePrincipalsFloodLeavesAnotherAlone$' ./mcpdoor/ >"$out" 2>&1; then
	grep -v 'level=' "$out" | tail -20 >&2
	exit 1
fi
grep '^flood:' "$out"
