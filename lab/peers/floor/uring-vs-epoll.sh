#!/usr/bin/env bash
# The io_uring floor (floor_uring.c) against the epoll floor (floor.c): server CPU time per request
# and wrk's p99, measured in interleaved rounds on loopback.
#
# Both floors are built with gcc -O2 and run side by side, each with WORKERS=1 and pinned to CPU 1
# (the idle one costs nothing); wrk (one thread) is pinned to CPU 0. Per cell, after a 1 s warm-up
# of each, ROUNDS rounds each measure both floors back to back (the order alternates: uring first
# in odd rounds, epoll first in even ones, so neither always follows the other). CPU time is the
# sum of the first field of /proc/PID/task/*/schedstat (ns on CPU, every thread: floor.c serves
# from a worker thread, not from the main one) before and after each wrk run, divided by the
# responses wrk counted. Each round gives a ratio uring/epoll; per cell the helper prints the
# median ratio, its min-max and a bootstrap 95% interval of the median (10,000 resamples of the
# rounds, fixed seed).
#
# Cells: c=1, c=50, c=1000, and c=50 with 16 pipelined requests per write
# (crates/peregrine-server/bench/pipeline.lua).
#
# usage: lab/peers/floor/uring-vs-epoll.sh [OUT_DIR]   (default: lab/results/uring-floor)
# env: ROUNDS (default 7, at least 5), DURATION (seconds per measurement, default 3, at least 3),
#      PORT (default 18400; epoll uses PORT+1), EPOLL_SRC (the epoll floor's source, default
#      lab/peers/floor/floor.c next to this script).
# Writes OUT_DIR/raw.csv (one row per measurement), OUT_DIR/summary.md (the table) and
# OUT_DIR/run.txt (machine, kernel, load before and after, the sources' hashes).
# Bounded: about 4 cells x ROUNDS x 2 x (DURATION + 0.5) s plus warm-ups; every wrk has a timeout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(realpath -m "${1:-$root/lab/results/uring-floor}")
rounds=${ROUNDS:-7}
dur=${DURATION:-3}
port_u=${PORT:-18400}
port_e=$((port_u + 1))
epoll_src=$(realpath "${EPOLL_SRC:-$here/floor.c}")
lua="$root/crates/peregrine-server/bench/pipeline.lua"
[ "$rounds" -ge 5 ] || { echo "ROUNDS must be at least 5" >&2; exit 2; }
[ "$dur" -ge 3 ] || { echo "DURATION must be at least 3 (seconds)" >&2; exit 2; }
if [ "$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo 0)" = 2 ]; then
  echo "kernel.io_uring_disabled=2: io_uring is disabled here, nothing to measure" >&2
  exit 3
fi

# Both floors use SO_REUSEPORT: a process already listening on a port would silently take a share
# of the connections, so the ports must be free.
for port in $port_u $port_e; do
  if [ -n "$(ss -ltnH "sport = :$port")" ]; then echo "port $port is in use; set PORT" >&2; exit 2; fi
done
mkdir -p "$out"
build=$(mktemp -d)
gcc -O2 -pthread -o "$build/floor" "$epoll_src"
gcc -O2 -pthread -o "$build/floor_uring" "$here/floor_uring.c" -luring

ADDR=127.0.0.1:$port_u WORKERS=1 taskset -c 1 "$build/floor_uring" 2>"$out/floor_uring.stderr" &
pid_u=$!
ADDR=127.0.0.1:$port_e WORKERS=1 taskset -c 1 "$build/floor" &
pid_e=$!
trap 'kill $pid_u $pid_e 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$build"' EXIT
for port in $port_u $port_e; do
  for _ in $(seq 50); do curl -fs "http://127.0.0.1:$port/plaintext" >/dev/null 2>&1 && break; sleep 0.1; done
  body=$(curl -fsS "http://127.0.0.1:$port/plaintext")
  [ "$body" = "Hello, World!" ] || { echo "port $port: unexpected body: $body" >&2; exit 1; }
done

{
  echo "date (UTC): $(date -u '+%Y-%m-%d %H:%M:%S')"
  echo "kernel: $(uname -r); io_uring_disabled=$(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo absent)"
  echo "cpus: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/\t//')"
  echo "liburing: $(dpkg-query -W -f '${Version}' liburing-dev 2>/dev/null || echo unknown)"
  echo "wrk: $(wrk -v 2>&1 | head -1)"
  echo "epoll floor source: $epoll_src (git blob $(git hash-object "$epoll_src"))"
  echo "uring floor source: $here/floor_uring.c (git blob $(git hash-object "$here/floor_uring.c"))"
  echo "rounds: $rounds x ${dur}s per floor per cell"
  echo "uptime before: $(uptime)"
} >"$out/run.txt"

cpu_ns() { # ns on CPU of every thread of process $1
  cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'
}
to_us() { # a wrk latency (e.g. 812.00us, 1.23ms, 2.00s) in µs
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1e6 : (u == "m") ? 6e7 : -1
    if (f < 0) { print "NA"; exit } printf "%.1f", n * f }'
}
measure() { # cell round floor pid port; wrk options in args[], the Lua script's arguments in extra[]
  local cell=$1 round=$2 name=$3 pid=$4 port=$5
  local c0 c1 res n p99 errs non2xx
  c0=$(cpu_ns "$pid")
  res=$(timeout $((dur + 20)) taskset -c 0 wrk -t1 --latency -d"${dur}s" "${args[@]}" \
    "http://127.0.0.1:$port/plaintext" "${extra[@]}")
  c1=$(cpu_ns "$pid")
  n=$(echo "$res" | awk '/requests in/ { print $1 }')
  p99=$(to_us "$(echo "$res" | awk '$1 == "99%" { print $2 }')")
  errs=$(echo "$res" | awk '/Socket errors/ { gsub(",", ""); printf "%d", $4 + $6 + $8 + $10 }')
  non2xx=$(echo "$res" | awk '/Non-2xx/ { print $NF }')
  [ -z "$non2xx" ] || { echo "$name $cell: $non2xx non-2xx responses" >&2; exit 1; }
  echo "$cell,$round,$name,$((c1 - c0)),$n,$p99,${errs:-0}" >>"$out/raw.csv"
  awk -v c=$((c1 - c0)) -v n="$n" -v p="$p99" -v cell="$cell" -v r="$round" -v f="$name" \
    'BEGIN { printf "  %-7s round %d %-6s %8.3f us CPU/request  p99 %s us\n", cell, r, f, c / n / 1000, p }'
}

echo "cell,round,floor,cpu_ns,requests,p99_us,socket_errors" >"$out/raw.csv"
for cell in c1 c50 c1000 c50p16; do
  extra=()
  case $cell in
    c1) args=(-c1) ;;
    c50) args=(-c50) ;;
    c1000) args=(-c1000) ;;
    c50p16) args=(-c50 -s "$lua") extra=(-- 16) ;;
  esac
  for port in $port_u $port_e; do # warm-up
    timeout 20 taskset -c 0 wrk -t1 -d1s "${args[@]}" "http://127.0.0.1:$port/plaintext" "${extra[@]}" >/dev/null
  done
  for r in $(seq "$rounds"); do
    if [ $((r % 2)) = 1 ]; then order="uring epoll"; else order="epoll uring"; fi
    for f in $order; do
      if [ "$f" = uring ]; then
        measure "$cell" "$r" uring "$pid_u" "$port_u"
      else
        measure "$cell" "$r" epoll "$pid_e" "$port_e"
      fi
    done
  done
done
echo "uptime after: $(uptime)" >>"$out/run.txt"
cat "$out/floor_uring.stderr" >>"$out/run.txt"

python3 "$here/uring_vs_epoll_summary.py" "$out/raw.csv" | tee "$out/summary.md"
