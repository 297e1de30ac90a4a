#!/usr/bin/env bash
# What one HTTP/2-over-TLS request costs a server besides CPU time: system calls, bytes written
# (TLS records included) and, with CACHEGRIND=1, user-space instructions, under the lab's `h2`
# lane load (h2load -c 50 -m 10 over TLS with ALPN h2, the lab's client OpenSSL setting; server
# pinned to CPU 1 with WORKERS=1, h2load on CPU 0). Used to find why Peregrine's HTTP/2 cost more
# than actix-web's (docs/performance.md, "HTTP/2 over TLS: CPU per request against actix-web").
#
# For each server, one after the other (not interleaved: for ratios use tls_interleaved.sh):
#   - CPU µs per request (schedstat of the server's threads) and system calls per request
#     (`perf stat -e 'syscalls:sys_enter_*'`) over `h2load -n N` after a 20,000-request warm-up;
#   - bytes the server wrote per request (`wchar` of /proc/PID/io: HTTP/2 frames + TLS records);
#   - CACHEGRIND=1: user-space instructions per request, the difference between a run of
#     `-n 30000` and one of `-n 10000` under cachegrind ÷ 20,000 (start-up and handshakes cancel).
#
# usage: bench/h2_per_request.sh BINARY...
#   each: a server taking ADDR, WORKERS, TLS_CERT, TLS_KEY and answering GET /plaintext over TLS
#   with ALPN h2 (the hello_tls example; the lab's actix-tls-peer, axum-tls-peer)
# env: N (default 100000), PORT (default 18450), CACHEGRIND (default 0). Needs perf (with
#   syscall tracepoints), h2load, valgrind for CACHEGRIND=1.
set -euo pipefail
n=${N:-100000}
port=${PORT:-18450}
work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The certificate and the lab's client OpenSSL setting, in "$work".
. "$(dirname "$0")/tls_setup.sh"

start() { # command... (server on CPU 1; sets pid, waits until it answers)
  ADDR=127.0.0.1:$port WORKERS=1 TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem \
    taskset -c 1 "$@" >"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 300); do
    OPENSSL_CONF=$work/client.cnf curl -fsk "https://127.0.0.1:$port/plaintext" >/dev/null 2>&1 && return
    sleep 0.2
  done
  echo "server did not answer: $*" >&2
  exit 1
}
stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
}
load() { # requests -> h2load's output
  OPENSSL_CONF=$work/client.cnf taskset -c 0 h2load -t1 -c50 -m10 -n"$1" \
    "https://127.0.0.1:$port/plaintext" </dev/null
}
cpu_ns() { cat /proc/"$pid"/task/*/schedstat | awk '{ s += $1 } END { printf "%.0f", s }'; }
field() { awk -v k="$1" '$1 == k":" { print $2 }' /proc/"$pid"/io; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for bin in "$@"; do
  bin=$(realpath "$bin")
  echo "== $bin"
  start "$bin"
  load 20000 >/dev/null
  events=syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_sendto
  events=$events,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read
  events=$events,syscalls:sys_enter_readv,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex
  perf stat -x, -e "$events" -p "$pid" -o "$work/stat" &
  perf_pid=$!
  sleep 0.3
  c0=$(cpu_ns)
  w0=$(field wchar)
  out=$(load "$n")
  c1=$(cpu_ns)
  w1=$(field wchar)
  kill -INT "$perf_pid"
  wait "$perf_pid" 2>/dev/null || true
  stop
  echo "$out" | grep -q "status codes: $n 2xx" || { echo "h2load: $out" >&2; exit 1; }
  echo "$out" | grep -E "Cipher:|Server Temp Key:|Application protocol:|traffic:"
  awk -v c="$c1" -v c0="$c0" -v w="$w1" -v w0="$w0" -v n="$n" 'BEGIN {
    printf "CPU %.3f us/request, %.2f bytes written/request\n", (c - c0) / 1e3 / n, (w - w0) / n }'
  awk -F, -v n="$n" '$3 ~ /syscalls/ && $1 + 0 > 0 {
    sub("syscalls:sys_enter_", "", $3); printf "  %-12s %.4f/request\n", $3, $1 / n }' "$work/stat"
  if [ "${CACHEGRIND:-0}" = 1 ]; then
    for m in 10000 30000; do
      ADDR=127.0.0.1:$port WORKERS=1 TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem taskset -c 1 \
        valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$work/cg.$m" "$bin" \
        >"$work/server.log" 2>&1 &
      pid=$!
      for _ in $(seq 300); do
        OPENSSL_CONF=$work/client.cnf curl -fsk "https://127.0.0.1:$port/plaintext" >/dev/null 2>&1 && break
        sleep 0.2
      done
      load "$m" | grep -q "status codes: $m 2xx" || { echo "h2load under cachegrind failed" >&2; exit 1; }
      kill -TERM "$pid"
      wait "$pid" 2>/dev/null || true
      pid=""
    done
    a=$(awk '/^summary:/ { print $2 }' "$work/cg.10000")
    b=$(awk '/^summary:/ { print $2 }' "$work/cg.30000")
    awk -v a="$a" -v b="$b" 'BEGIN { printf "  user-space instructions %.0f/request\n", (b - a) / 20000 }'
  fi
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
