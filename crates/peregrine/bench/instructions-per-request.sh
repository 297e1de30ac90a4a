#!/usr/bin/env bash
# Instructions per request (noise-free, docs/measuring.md item 4): run the scenarios
# example under `valgrind --tool=cachegrind --cache-sim=no` with one worker, send N1 then (in a
# second run) N2 keep-alive requests on one connection, and divide the difference of the
# instruction totals by N2 - N1. Startup and shutdown cancel out. N1=0 skips the first run: the
# figure is then the whole process's instructions / N2, start-up included. DEPTH=D sends the
# requests D per write (pipelined) and reads the D answers before the next write.
#
# usage: [DEPTH=D] crates/peregrine/bench/instructions-per-request.sh [BINARY] [N1] [N2] [PATH...]
set -euo pipefail
BIN=${1:-target/release/examples/scenarios}
N1=${2:-2000}
N2=${3:-12000}
shift 3 || true
PATHS=("$@")
[ ${#PATHS[@]} -eq 0 ] && PATHS=(/plaintext /users/42 /json)
PORT=${PORT:-18282}
DEPTH=${DEPTH:-1}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

client() { # path count: keep-alive GETs, DEPTH per write, each response read fully and checked
  python3 - "$PORT" "$1" "$2" "$DEPTH" <<'PY'
import socket, sys
port, path, n, depth = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = socket.create_connection(("127.0.0.1", port))
req = f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode()
buf = b""
for i in range(n):
    if i % depth == 0:
        s.sendall(req * min(depth, n - i))
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, buf = buf.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200"), head
    length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    while len(buf) < length:
        buf += s.recv(65536)
    buf = buf[length:]
PY
}

run() { # path count -> total instructions
  local out="$TMP/cg.$RANDOM"
  ADDR=127.0.0.1:$PORT WORKERS=1 valgrind --tool=cachegrind --cache-sim=no \
    --cachegrind-out-file="$out" "$BIN" >/dev/null 2>"$TMP/vg.log" &
  local pid=$!
  for _ in $(seq 300); do curl -sf "http://127.0.0.1:$PORT/plaintext" >/dev/null 2>&1 && break; sleep 0.1; done
  client "$1" "$2"
  kill -TERM $pid
  wait $pid || true
  awk '/^summary:/ {print $2}' "$out"
}

for p in "${PATHS[@]}"; do
  a=0
  [ "$N1" -gt 0 ] && a=$(run "$p" "$N1")
  b=$(run "$p" "$N2")
  awk -v p="$p" -v a="$a" -v b="$b" -v n1="$N1" -v n2="$N2" \
    'BEGIN {printf "path=%s instructions_per_request=%.0f\n", p, (b - a) / (n2 - n1)}'
done
