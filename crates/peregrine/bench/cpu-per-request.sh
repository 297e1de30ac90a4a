#!/usr/bin/env bash
# Server CPU time per request for scenario paths of the scenarios example, measured the way
# docs/measuring.md describes: server pinned to CPU 1 with one worker, wrk pinned to
# CPU 0, utime+stime of every server thread before/after, divided by the responses wrk counted.
#
# usage: crates/peregrine/bench/cpu-per-request.sh [BINARY] [SECONDS] [CONNECTIONS] [ROUNDS]
#        PIPELINE=16 ... pipelines 16 requests per write (bench/pipeline.lua)
# prints one line per path and round, then the median per path and the ratio to /plaintext.
set -euo pipefail
BIN=${1:-target/release/examples/scenarios}
DUR=${2:-10}
CONNS=${3:-50}
ROUNDS=${4:-3}
PORT=${PORT:-18181}
PIPELINE=${PIPELINE:-0}
read -r -a PATHS <<<"${PATHS:-/plaintext /users/42 /json}"
HERE=$(cd "$(dirname "$0")" && pwd)
WRK_ARGS=()
[ "$PIPELINE" -gt 0 ] && WRK_ARGS=(-s "$HERE/pipeline.lua")
TCK=$(getconf CLK_TCK)

ADDR=127.0.0.1:$PORT WORKERS=1 taskset -c 1 "$BIN" >/dev/null 2>&1 &
SRV=$!
trap 'kill -TERM $SRV 2>/dev/null; wait $SRV 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$PORT/plaintext" >/dev/null && break; sleep 0.1; done

ticks() { # total utime+stime of all threads of the server
  local t=0
  for f in /proc/$SRV/task/*/stat; do
    t=$((t + $(awk '{print $14 + $15}' "$f")))
  done
  echo $t
}

declare -A RES
for round in $(seq "$ROUNDS"); do
  for p in "${PATHS[@]}"; do
    taskset -c 0 wrk -t1 -c"$CONNS" -d2s "${WRK_ARGS[@]}" "http://127.0.0.1:$PORT$p" -- "$PIPELINE" >/dev/null # warm-up
    before=$(ticks)
    out=$(taskset -c 0 wrk -t1 -c"$CONNS" -d"${DUR}s" "${WRK_ARGS[@]}" "http://127.0.0.1:$PORT$p" -- "$PIPELINE")
    after=$(ticks)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
    us=$(awk -v d=$((after - before)) -v t="$TCK" -v n="$reqs" 'BEGIN {printf "%.3f", d / t * 1e6 / n}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    echo "round=$round path=$p requests=$reqs non2xx=${non2xx:-0} rps=$rps cpu_us_per_req=$us"
    RES[$p]="${RES[$p]:-} $us"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
base=$(echo "${RES[/plaintext]}" | median)
for p in "${PATHS[@]}"; do
  m=$(echo "${RES[$p]}" | median)
  awk -v p="$p" -v m="$m" -v b="$base" 'BEGIN {printf "median path=%s cpu_us_per_req=%.3f ratio_to_plaintext=%.3f\n", p, m, m / b}'
done
