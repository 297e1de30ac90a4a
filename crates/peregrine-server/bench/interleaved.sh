#!/usr/bin/env bash
# Server CPU time per request of two servers, measured in alternation: A, B, A, B, ... with both
# servers running side by side (pinned to the same CPU, the idle one costs nothing). On a shared
# machine, load changes between two back-to-back measurements far less than between the first
# and the last minute of `measure.sh`, so the per-round ratios A/B are steadier than ratios of
# separate runs; the median of the rounds is reported with its spread.
#
# Cells: c=50 without pipelining, and c=64 with 16 pipelined requests per write (issue 3's).
#
# usage: bench/interleaved.sh [BINARY_A [BINARY_B]]
#   default: the release hello example against the lab's floor program
#   (gcc -O2 -pthread -o lab/peers/floor/floor lab/peers/floor/floor.c).
#   Each binary must listen on $ADDR, honour WORKERS and answer GET /plaintext.
# env: ROUNDS (default 7), DURATION (per measurement, default 3s), PORT (default 18300; B uses +1)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
a=$(realpath "${1:-${CARGO_TARGET_DIR:-$root/target}/release/examples/hello}")
b=$(realpath "${2:-$root/lab/peers/floor/floor}")
rounds=${ROUNDS:-7}
dur=${DURATION:-3s}
port_a=${PORT:-18300}
port_b=$((port_a + 1))
tck=$(getconf CLK_TCK)

(cd "$(dirname "$a")" && ADDR=127.0.0.1:$port_a WORKERS=1 exec taskset -c 1 "$a") &
pid_a=$!
(cd "$(dirname "$b")" && ADDR=127.0.0.1:$port_b WORKERS=1 exec taskset -c 1 "$b") &
pid_b=$!
trap 'kill $pid_a $pid_b 2>/dev/null || true' EXIT
for port in $port_a $port_b; do
  for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/plaintext" >/dev/null 2>&1 && break; sleep 0.1; done
  body=$(curl -fsS "http://127.0.0.1:$port/plaintext")
  [ "$body" = "Hello, World!" ] || { echo "port $port: unexpected body: $body" >&2; exit 1; }
done

cpu() { # clock ticks used by every thread of process $1
  cat /proc/"$1"/task/*/stat | awk '{ s += $14 + $15 } END { print s }'
}
measure() { # pid port wrk-args... -> CPU µs per response
  local pid=$1 port=$2
  shift 2
  local c0 c1 out n non2xx
  c0=$(cpu "$pid")
  out=$(taskset -c 0 wrk -t1 "$@" -d"$dur" "http://127.0.0.1:$port/plaintext")
  c1=$(cpu "$pid")
  non2xx=$(echo "$out" | awk '/Non-2xx/ { print $NF }')
  [ -z "$non2xx" ] || { echo "port $port: $non2xx non-2xx responses" >&2; exit 1; }
  n=$(echo "$out" | awk '/requests in/ { print $1 }')
  awk -v c=$((c1 - c0)) -v n="$n" -v t="$tck" 'BEGIN { printf "%.4f", c / t * 1e6 / n }'
}

echo "A = $a"
echo "B = $b"
for cell in "c=50" "c=64, 16 pipelined"; do
  if [ "$cell" = "c=50" ]; then args=(-c50); else args=(-c64 -s "$here/pipeline.lua"); fi
  taskset -c 0 wrk -t1 "${args[@]}" -d1s "http://127.0.0.1:$port_a/plaintext" >/dev/null # warm-up
  taskset -c 0 wrk -t1 "${args[@]}" -d1s "http://127.0.0.1:$port_b/plaintext" >/dev/null
  ratios=()
  for i in $(seq "$rounds"); do
    x=$(measure $pid_a $port_a "${args[@]}")
    y=$(measure $pid_b $port_b "${args[@]}")
    r=$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.3f", x / y }')
    ratios+=("$r")
    printf '%-20s round %d: A %s us/request, B %s us/request, A/B %s\n' "$cell" "$i" "$x" "$y" "$r"
  done
  printf '%s\n' "${ratios[@]}" | sort -n | awk -v cell="$cell" \
    '{ v[NR] = $1 } END { printf "== %-20s A/B median %.3f (min %.3f, max %.3f, %d rounds)\n", cell, v[int((NR + 1) / 2)], v[1], v[NR], NR }'
done
