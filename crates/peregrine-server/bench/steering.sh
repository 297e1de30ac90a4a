#!/usr/bin/env bash
# Multi-worker steering, measured: the same binary with WORKERS=2 in three modes, side by side
# (each on its own port, the idle ones cost nothing), measured in turn in every round:
#   spread     plain SO_REUSEPORT: the kernel hashes each connection to a worker
#   steer      STEER=1: each connection goes to the worker of the CPU that received it
#   steer+pin  STEER=1 PIN=1: the same, with worker i pinned to CPU i
# The order of the modes rotates from round to round. Per measurement: server CPU time
# (utime+stime of every thread, from /proc) per response, responses per second (wrk), each
# worker's share of the server's CPU time, and the 1-minute load average when it started.
# The summary gives, per cell, the per-round ratios of each mode to the spread measured in the
# same round: median, min/max and a bootstrap 95% interval of the median (paired rounds).
#
# NOT the one-server-core method of docs/measuring.md: two workers use both cores of a 2-core
# machine, so the load generator (wrk -t2, unpinned) SHARES the cores with the server, and on a
# shared machine so does everyone else's work. Absolute figures move with the load; only the
# ratios within a round are meant to be compared.
#
# Cells: keep-alive (c=50, connections opened once) and connection: close (c=50, a new
# connection per request: accept and steering on every request), each with two clients:
#   rss   two wrk -t1, one pinned to each CPU, half the connections each. On loopback the CPU
#         that receives a packet is the sender's, so this is what a multi-queue NIC's RSS does:
#         connections arrive spread over the CPUs.
#   free  one wrk -t2, unpinned: where its connections arrive is up to the scheduler (all on
#         one CPU, often: then steering puts them all on one worker).
#
# usage: bench/steering.sh [BINARY]   (default: the release hello example,
#          cargo build --release -p peregrine-server --example hello)
#   The binary must listen on $ADDR, honour WORKERS, STEER and PIN, answer GET /plaintext.
# env: ROUNDS (default 7), DURATION (per measurement, default 3s), CONNS (default 50),
#      PORT (default 18400; the modes use PORT, PORT+1, PORT+2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-$root/target}/release/examples/hello}")
rounds=${ROUNDS:-7}
dur=${DURATION:-3s}
conns=${CONNS:-50}
port0=${PORT:-18400}
tck=$(getconf CLK_TCK)
modes=(spread steer steer+pin)
results=$(mktemp)

declare -A pid port
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$results"' EXIT
for i in "${!modes[@]}"; do
  m=${modes[$i]}
  p=$((port0 + i))
  steer=0 pin=0
  case $m in steer) steer=1 ;; steer+pin) steer=1 pin=1 ;; esac
  (cd "$(dirname "$bin")" && ADDR=127.0.0.1:$p WORKERS=2 STEER=$steer PIN=$pin exec "$bin") &
  pid[$m]=$!
  pids+=($!)
  port[$m]=$p
done
for m in "${modes[@]}"; do
  url="http://127.0.0.1:${port[$m]}/plaintext"
  for _ in $(seq 50); do curl -fs "$url" >/dev/null 2>&1 && break; sleep 0.1; done
  body=$(curl -fsS "$url")
  [ "$body" = "Hello, World!" ] || { echo "$m: unexpected body: $body" >&2; exit 1; }
done

worker_ticks() { # pid -> "w0 w1": clock ticks of each worker thread
  local w0=0 w1=0 f name t
  for f in /proc/"$1"/task/*/stat; do
    read -r name t < <(awk '{ print $2, $14 + $15 }' "$f")
    case $name in "(peregrine-w0)") w0=$t ;; "(peregrine-w1)") w1=$t ;; esac
  done
  echo "$w0 $w1"
}
cpu() { cat /proc/"$1"/task/*/stat | awk '{ s += $14 + $15 } END { print s }'; }

load_gen() { # client port duration wrk-args... -> wrk's output (both wrk's with client rss)
  local client=$1 p=$2 d=$3
  shift 3
  local url="http://127.0.0.1:$p/plaintext"
  if [ "$client" = rss ]; then
    taskset -c 0 wrk -t1 -c$((conns / 2)) "$@" -d"$d" "$url" &
    local first=$!
    taskset -c 1 wrk -t1 -c$((conns - conns / 2)) "$@" -d"$d" "$url"
    wait "$first"
  else
    wrk -t2 -c"$conns" "$@" -d"$d" "$url"
  fi
}

measure() { # cell client mode wrk-args... -> one result line
  local cell=$1 client=$2 m=$3
  shift 3
  local p=${pid[$m]} c0 c1 out n rps non2xx load w0 w1 v0 v1
  load=$(cut -d' ' -f1 /proc/loadavg)
  read -r w0 w1 < <(worker_ticks "$p")
  c0=$(cpu "$p")
  out=$(load_gen "$client" "${port[$m]}" "$dur" "$@")
  c1=$(cpu "$p")
  read -r v0 v1 < <(worker_ticks "$p")
  non2xx=$(echo "$out" | awk '/Non-2xx/ { s += $NF } END { if (s) print s }')
  [ -z "$non2xx" ] || { echo "$m: $non2xx non-2xx responses" >&2; exit 1; }
  n=$(echo "$out" | awk '/requests in/ { s += $1 } END { print s }')
  rps=$(echo "$out" | awk '/Requests\/sec/ { s += $2 } END { print s }')
  awk -v cell="$cell" -v m="$m" -v c=$((c1 - c0)) -v n="$n" -v t="$tck" -v rps="$rps" \
    -v load="$load" -v a=$((v0 - w0)) -v b=$((v1 - w1)) -v r="$round" 'BEGIN {
      share = (a + b) > 0 ? a / (a + b) : 0
      printf "%s\t%d\t%s\t%.4f\t%.0f\t%.2f\t%s\n", cell, r, m, c / t * 1e6 / n, rps, share, load }'
}

echo "binary: $bin"
echo "WORKERS=2 on $(nproc) CPUs, c=$conns; the load generator (wrk) shares the machine's CPUs with the server"
printf '%-14s %5s %-9s %10s %10s %8s %6s\n' cell round mode us/req req/s w0-share load
for cell in keepalive-rss keepalive-free close-rss close-free; do
  client=${cell#*-}
  args=()
  case $cell in close-*) args=(-H "Connection: close") ;; esac
  for m in "${modes[@]}"; do # warm-up
    load_gen "$client" "${port[$m]}" 1s "${args[@]}" >/dev/null
  done
  for round in $(seq "$rounds"); do
    k=${#modes[@]}
    for j in $(seq 0 $((k - 1))); do
      m=${modes[$(((j + round) % k))]}
      line=$(measure "$cell" "$client" "$m" "${args[@]}")
      echo "$line" >>"$results"
      echo "$line" | awk -F'\t' '{ printf "%-14s %5s %-9s %10s %10s %8s %6s\n", $1, $2, $3, $4, $5, $6, $7 }'
    done
  done
done

python3 - "$results" <<'EOF'
import math
import random
import statistics
import sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1])]
data = {}  # (cell, round, mode) -> (us, rps, share, load)
for cell, rnd, mode, us, rps, share, load in rows:
    data[(cell, int(rnd), mode)] = (float(us), float(rps), float(share), float(load))


def ci(ratios):
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(2000))
    return meds[math.floor(0.025 * 1999)], meds[math.ceil(0.975 * 1999)]


print()
for cell in dict.fromkeys(r[0] for r in rows):
    rounds = sorted({k[1] for k in data if k[0] == cell})
    loads = [data[(cell, r, m)][3] for r in rounds for m in ("spread", "steer", "steer+pin")]
    print(f"== {cell}: {len(rounds)} rounds, load average {min(loads):.2f}-{max(loads):.2f}")
    for m in ("spread", "steer", "steer+pin"):
        us = statistics.median(data[(cell, r, m)][0] for r in rounds)
        rps = statistics.median(data[(cell, r, m)][1] for r in rounds)
        share = statistics.median(data[(cell, r, m)][2] for r in rounds)
        print(f"   {m:<9} median {us:.3f} us/request, {rps:.0f} requests/s, worker 0 share {share:.2f}")
    for m in ("steer", "steer+pin"):
        for i, what in ((0, "CPU/request"), (1, "requests/s")):
            ratios = [data[(cell, r, m)][i] / data[(cell, r, "spread")][i] for r in rounds]
            lo, hi = ci(ratios) if len(ratios) > 1 else (ratios[0], ratios[0])
            print(
                f"   {m}/spread {what:<11} median {statistics.median(ratios):.3f} "
                f"(min {min(ratios):.3f}, max {max(ratios):.3f}; 95% interval {lo:.3f}-{hi:.3f})"
            )
EOF
