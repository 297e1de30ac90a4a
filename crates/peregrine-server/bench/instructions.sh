#!/usr/bin/env bash
# User-space instructions per request, noise-free (docs/measuring.md, point 4): each
# server runs under `valgrind --tool=cachegrind --cache-sim=no`; a client sends N1 requests,
# then N2 more, the instruction total is read after each phase from cachegrind's output
# (dumped at exit, so the server is started twice), and (I(N2) - I(N1)) / (N2 - N1) is reported.
# Kernel time is not counted: this is the server's own code plus libc.
#
# usage: bench/instructions.sh [BINARY...]   (default: release hello example, then the floor)
# env: DEPTHS (pipelined requests per write, one run per depth, default "1 16 256"; DEPTH=N is
#      the same as DEPTHS=N), N1 (default 20000), N2 (default 60000), CONNS (client connections,
#      default 10), PORT (default 18180). At depth D each connection sends its share of requests
#      in writes of D requests, so N1 and N2 are rounded up to a multiple of CONNS x D.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
if [ $# -eq 0 ]; then
  set -- "${CARGO_TARGET_DIR:-$root/target}/release/examples/hello"
  [ -x "$root/lab/peers/floor/floor" ] && set -- "$@" "$root/lab/peers/floor/floor"
fi
n1=${N1:-20000}
n2=${N2:-60000}
depths=${DEPTHS:-${DEPTH:-1 16 256}}
conns=${CONNS:-10}
port=${PORT:-18180}

total_for() { # binary, requests -> instructions
  local bin=$1 n=$2 out
  out=$(mktemp)
  (cd "$(dirname "$bin")" && ADDR=127.0.0.1:$port WORKERS=1 exec valgrind --tool=cachegrind \
    --cache-sim=no --cachegrind-out-file="$out" "$bin") >/dev/null 2>&1 &
  local pid=$!
  python3 - "$port" "$n" "$depth" "$conns" <<'PY'
import socket, sys, time
port, n, depth, conns = (int(a) for a in sys.argv[1:5])
for _ in range(300):
    try:
        socket.create_connection(("127.0.0.1", port)).close()
        break
    except OSError:
        time.sleep(0.1)
req = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
per = n // conns
for s in socks:
    left, buf = per, b""
    while left:
        k = min(depth, left)
        s.sendall(req * k)
        got = 0
        while got < k:
            buf += s.recv(65536)
            got += buf.count(b"Hello, World!")
            buf = buf[buf.rfind(b"Hello, World!") + 13:] if b"Hello, World!" in buf else buf
        left -= k
for s in socks:
    s.close()
PY
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  awk '/^summary:/ { print $2 }' "$out"
  rm -f "$out"
}

round_up() { # n, unit -> n rounded up to a multiple of unit
  echo $((($1 + $2 - 1) / $2 * $2))
}

for depth in $depths; do
  m1=$(round_up "$n1" $((conns * depth)))
  m2=$(round_up "$n2" $((conns * depth)))
  for bin in "$@"; do
    bin=$(realpath "$bin")
    i1=$(total_for "$bin" "$m1")
    i2=$(total_for "$bin" "$m2")
    awk -v b="$(basename "$bin")" -v a="$i1" -v c="$i2" -v n1="$m1" -v n2="$m2" -v d="$depth" \
      'BEGIN { printf "%-12s depth %-3d %8.0f instructions/request (user space; %d vs %d requests)\n", b, d, (c - a) / (n2 - n1), n1, n2 }'
  done
done
