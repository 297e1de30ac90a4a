#!/usr/bin/env bash
# Server CPU time per request of two servers, measured in alternation: A, B, A, B, ... with both
# servers running side by side (pinned to the same CPU, the idle one costs nothing). On a shared
# machine, load changes between two back-to-back measurements far less than between the first
# and the last minute of `measure.sh`, so the per-round ratios A/B are steadier than ratios of
# separate runs; the median of the rounds is reported with its spread.
#
# Lanes (LANES, default "c1 c50 p16 p256"):
#   c1    one connection, no pipelining (target <= 1.05x the floor)
#   c50   50 connections, no pipelining (target <= 1.03x)
#   p16   64 connections x 16 pipelined requests per write (target <= 1.10x)
#   p256  64 connections x 256 pipelined requests per write (target <= 1.6x)
# CPU time: the sum over the server's threads of /proc/PID/task/TID/schedstat (ns), or of the
# clock ticks of /proc/PID/task/TID/stat (10 ms) where schedstat is missing.
# Per lane: each round's ratio A/B, then the median ratio with its 95% interval (percentile
# bootstrap of the median over the rounds' ratios, lab/peregrine_lab/stats.py) and the range;
# the load average is printed at the start and at the end (a busy machine widens the interval).
#
# usage: bench/interleaved.sh [BINARY_A [BINARY_B]]
#   default: the release hello example against the lab's floor program
#   (gcc -O2 -pthread -o lab/peers/floor/floor lab/peers/floor/floor.c).
#   Each binary must listen on $ADDR, honour WORKERS and answer GET /plaintext.
# env: ROUNDS (default 7), DURATION (per measurement, default 3s), PORT (default 18300; B uses +1),
#      LANES (default "c1 c50 p16 p256"), MODE (default alternate):
#   MODE=alternate  A is loaded, then B, then A... (each server alone on CPU 1 while measured)
#   MODE=together   A and B are loaded at the same time, by two wrk on CPU 0, and both measured
#                   over the same window: the two servers share CPU 1, so every change of the
#                   machine's load hits both sides of a round's ratio. Intervals are far
#                   narrower (docs/performance.md, "the method's noise"), at another operating
#                   point: a server is often woken while the other one runs.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
a=$(realpath "${1:-${CARGO_TARGET_DIR:-$root/target}/release/examples/hello}")
b=$(realpath "${2:-$root/lab/peers/floor/floor}")
rounds=${ROUNDS:-7}
dur=${DURATION:-3s}
port_a=${PORT:-18300}
port_b=$((port_a + 1))
lanes=${LANES:-c1 c50 p16 p256}
mode=${MODE:-alternate}
case $mode in alternate | together) ;; *) echo "unknown MODE $mode (alternate, together)" >&2; exit 2 ;; esac
tck=$(getconf CLK_TCK)
# CPU time in nanoseconds from /proc/PID/task/TID/schedstat (the scheduler's sum_exec_runtime,
# as the lab's metrics.py reads it); the 10 ms clock ticks of /proc/PID/task/TID/stat where the
# kernel has no schedstat. At c=1 a 2 s round is about 30 ms of server CPU: ticks alone would
# put ±30% of rounding noise into every ratio.
if [ -r /proc/self/schedstat ]; then cpu_source=schedstat; else cpu_source=ticks; fi
for lane in $lanes; do
  case $lane in c1 | c50 | p16 | p256) ;; *) echo "unknown lane $lane (c1 c50 p16 p256)" >&2; exit 2 ;; esac
done

# Both servers bind with SO_REUSEPORT: a second benchmark on the same ports would silently get
# part of the connections (and of the rounds' requests). Refuse instead.
for port in $port_a $port_b; do
  if [ -n "$(ss -Htln "sport = :$port" 2>/dev/null)" ]; then
    echo "port $port is already listened on (another benchmark running?): set PORT" >&2
    exit 1
  fi
done

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

cpu() { # nanoseconds on CPU of every thread of process $1
  if [ $cpu_source = schedstat ]; then
    cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'
  else
    cat /proc/"$1"/task/*/stat | awk -v t="$tck" '{ s += $14 + $15 } END { printf "%.0f", s * 1e9 / t }'
  fi
}
measure() { # pid port wrk-args... -> CPU µs per response
  local pid=$1 port=$2
  shift 2
  local c0 c1 out n non2xx
  c0=$(cpu "$pid")
  out=$(taskset -c 0 wrk -t1 -d"$dur" "$@" "http://127.0.0.1:$port/plaintext" "${script_args[@]}")
  c1=$(cpu "$pid")
  non2xx=$(echo "$out" | awk '/Non-2xx/ { print $NF }')
  [ -z "$non2xx" ] || { echo "port $port: $non2xx non-2xx responses" >&2; exit 1; }
  n=$(echo "$out" | awk '/requests in/ { print $1 }')
  awk -v c0="$c0" -v c1="$c1" -v n="$n" 'BEGIN { printf "%.4f", (c1 - c0) / 1e3 / n }'
}

measure_both() { # wrk-args... -> CPU µs per response of A and of B, over the same window
  local a0 b0 a1 b1 oa ob wa wb na nb
  oa=$(mktemp)
  ob=$(mktemp)
  a0=$(cpu $pid_a)
  b0=$(cpu $pid_b)
  taskset -c 0 wrk -t1 -d"$dur" "$@" "http://127.0.0.1:$port_a/plaintext" "${script_args[@]}" >"$oa" &
  wa=$!
  taskset -c 0 wrk -t1 -d"$dur" "$@" "http://127.0.0.1:$port_b/plaintext" "${script_args[@]}" >"$ob" &
  wb=$!
  wait $wa $wb
  a1=$(cpu $pid_a)
  b1=$(cpu $pid_b)
  for out in "$oa" "$ob"; do
    non2xx=$(awk '/Non-2xx/ { print $NF }' "$out")
    [ -z "$non2xx" ] || { echo "$non2xx non-2xx responses" >&2; exit 1; }
  done
  na=$(awk '/requests in/ { print $1 }' "$oa")
  nb=$(awk '/requests in/ { print $1 }' "$ob")
  rm -f "$oa" "$ob"
  awk -v a0="$a0" -v a1="$a1" -v b0="$b0" -v b1="$b1" -v na="$na" -v nb="$nb" \
    'BEGIN { printf "%.4f %.4f\n", (a1 - a0) / 1e3 / na, (b1 - b0) / 1e3 / nb }'
}

echo "A = $a"
echo "B = $b"
echo "CPU time from: $cpu_source; mode: $mode"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
summary=()
for lane in $lanes; do
  case $lane in
    c1) cell="c=1"; target=1.05; args=(-c1); script_args=() ;;
    c50) cell="c=50"; target=1.03; args=(-c50); script_args=() ;;
    p16) cell="c=64 x 16 pipelined"; target=1.10; args=(-c64 -s "$here/pipeline.lua"); script_args=(-- 16) ;;
    p256) cell="c=64 x 256 pipelined"; target=1.6; args=(-c64 -s "$here/pipeline.lua"); script_args=(-- 256) ;;
  esac
  # Warm-up.
  taskset -c 0 wrk -t1 -d1s "${args[@]}" "http://127.0.0.1:$port_a/plaintext" "${script_args[@]}" >/dev/null
  taskset -c 0 wrk -t1 -d1s "${args[@]}" "http://127.0.0.1:$port_b/plaintext" "${script_args[@]}" >/dev/null
  ratios=()
  for i in $(seq "$rounds"); do
    if [ "$mode" = together ]; then
      read -r x y < <(measure_both "${args[@]}")
      [ -n "$y" ] || exit 1 # (measure_both said why)
    else
      x=$(measure $pid_a $port_a "${args[@]}")
      y=$(measure $pid_b $port_b "${args[@]}")
    fi
    r=$(awk -v x="$x" -v y="$y" 'BEGIN { printf "%.4f", x / y }')
    ratios+=("$r")
    printf '%-22s round %d: A %s us/request, B %s us/request, A/B %s\n' "$cell" "$i" "$x" "$y" "$r"
  done
  # The targets are against the floor: another B gets no verdict.
  [ "$(basename "$b")" = floor ] || target=0
  line=$(PYTHONPATH="$root/lab" python3 - "$cell" "$target" "${ratios[@]}" <<'PY'
import statistics, sys
from peregrine_lab.stats import bootstrap_median_ci
cell, target, ratios = sys.argv[1], float(sys.argv[2]), [float(r) for r in sys.argv[3:]]
ci = bootstrap_median_ci(ratios)
lo, hi = ci if ci else (float("nan"), float("nan"))
verdict = "met" if ci and hi <= target else "not met"
line = (f"== {cell:<22} A/B median {statistics.median(ratios):.3f}  95% CI [{lo:.3f}, {hi:.3f}]"
        f"  range {min(ratios):.3f}-{max(ratios):.3f}  {len(ratios)} rounds")
print(line + (f"  (target <= {target:g}: {verdict})" if target else ""))
PY
)
  echo "$line"
  summary+=("$line")
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${summary[@]}"
