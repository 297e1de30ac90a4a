#!/usr/bin/env bash
# Server CPU time per MiB of a large static file, sendfile(2) vs read/write, on loopback.
# The static_files example serves one SIZE_MIB file (random bytes) through ServeDir; in
# "sendfile" mode the engine writes it with sendfile(2), in "copy" mode (COPY=1: the TCP stream
# is handed over as a generic transport, the path TLS takes) it reads 256 KiB pieces with
# pread(2) and writes them with write(2). Server: one worker pinned to CPU 1; wrk pinned to
# CPU 0. CPU = sum of the first field of /proc/PID/task/*/schedstat (ns on CPU, all threads)
# before/after, divided by the MiB wrk read (partial responses included).
#
# usage: crates/peregrine/bench/static-file-cpu.sh [BINARY] [SECONDS] [CONNECTIONS] [ROUNDS]
#        SIZE_MIB=64 PORT=18282
# build: cargo build --release -p peregrine --example static_files
set -euo pipefail
BIN=${1:-target/release/examples/static_files}
DUR=${2:-10}
CONNS=${3:-4}
ROUNDS=${4:-3}
SIZE_MIB=${SIZE_MIB:-64}
PORT=${PORT:-18282}
URL="http://127.0.0.1:$PORT/static/big.bin"

DIR=$(mktemp -d)
SRV=
cleanup() {
  [ -n "$SRV" ] && { kill -TERM "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null || true; }
  rm -rf "$DIR"
}
trap cleanup EXIT
head -c $((SIZE_MIB << 20)) /dev/urandom >"$DIR/big.bin"
# Warm the page cache: both modes read the file from memory.
cat "$DIR/big.bin" >/dev/null

cpu_ns() { # ns on CPU of every server thread
  local t=0
  for f in /proc/$SRV/task/*/schedstat; do
    t=$((t + $(awk '{print $1}' "$f")))
  done
  echo $t
}

mib_read() { # wrk's "N.NNXB read" line in MiB (wrk's units are powers of 1024)
  awk '/ read$/ {
    v = $(NF-1); u = v; sub(/[0-9.]+/, "", u); sub(/[A-Za-z]+$/, "", v)
    m = (u == "GB") ? 1024 : (u == "MB") ? 1 : (u == "KB") ? 1 / 1024 : 1 / 1048576
    printf "%.3f", v * m
  }'
}

declare -A RES
for round in $(seq "$ROUNDS"); do
  for mode in sendfile copy; do
    copy=0
    [ "$mode" = copy ] && copy=1
    COPY=$copy DIR="$DIR" ADDR=127.0.0.1:$PORT WORKERS=1 taskset -c 1 "$BIN" >/dev/null 2>&1 &
    SRV=$!
    for _ in $(seq 50); do curl -sfI "$URL" >/dev/null && break; sleep 0.1; done
    # The whole file arrives, with Content-Length, in both modes.
    got=$(curl -s -o /dev/null -w '%{size_download} %{http_code}' "$URL")
    [ "$got" = "$((SIZE_MIB << 20)) 200" ] || { echo "bad response in $mode mode: $got" >&2; exit 1; }
    taskset -c 0 wrk -t1 -c"$CONNS" -d2s "$URL" >/dev/null # warm-up
    before=$(cpu_ns)
    out=$(taskset -c 0 wrk -t1 -c"$CONNS" -d"${DUR}s" "$URL")
    after=$(cpu_ns)
    mib=$(echo "$out" | mib_read)
    reqs=$(echo "$out" | awk '/requests in/ {print $1}')
    rate=$(echo "$out" | awk '/Transfer\/sec/ {print $2}')
    us=$(awk -v d=$((after - before)) -v m="$mib" 'BEGIN {printf "%.2f", d / 1000 / m}')
    echo "round=$round mode=$mode responses=$reqs mib=$mib transfer_per_s=$rate server_cpu_us_per_mib=$us"
    RES[$mode]="${RES[$mode]:-} $us"
    kill -TERM "$SRV"
    wait "$SRV" 2>/dev/null || true
    SRV=
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
s=$(echo "${RES[sendfile]}" | median)
c=$(echo "${RES[copy]}" | median)
awk -v s="$s" -v c="$c" 'BEGIN {printf "median sendfile_us_per_mib=%.2f copy_us_per_mib=%.2f copy/sendfile=%.2f\n", s, c, c / s}'
