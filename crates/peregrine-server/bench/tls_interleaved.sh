#!/usr/bin/env bash
# Server CPU time per request over TLS of two Peregrine binaries (A, B), optionally a third
# server C (a peer such as the lab's actix-tls-peer), and nginx, measured in alternation (A, B, C,
# nginx, A, B, C, nginx, ...) with all of them running side by side on CPU 1 and the load
# generators on CPU 0: the quick before/after check of the lab's `protocols` lanes
# (./scripts/lab protocols builds every peer; this needs only the binaries and Debian nginx).
#
# Lanes, as the lab runs them (lab/peregrine_lab/tls_lanes.py): `https` is keep-alive HTTP/1.1
# over TLS, wrk -c 50 (ALPN not offered); `h2` is HTTP/2 over TLS (ALPN h2), h2load -c 50 -m 10.
# Every client reads the lab's OpenSSL setting (TLS 1.3, TLS_AES_128_GCM_SHA256, X25519) and every
# server gets one self-signed ECDSA P-256 certificate. CPU time: the sum of
# /proc/PID/task/*/schedstat over each server's process tree (nginx: master and worker).
# Prints each round, then per lane the medians and the A/nginx, B/nginx, A/B (and A/C, B/C)
# ratios' medians with bootstrap 95% intervals (2000 resamples of the rounds), and the load
# average.
#
# usage: bench/tls_interleaved.sh BINARY_A BINARY_B [BINARY_C]
#   A, B: the hello_tls example (ADDR, WORKERS, TLS_CERT, TLS_KEY; GET /plaintext), e.g.
#   cargo build --release -p peregrine-server --example hello_tls --features tls,http2
#   C: any server taking the same environment and answering GET /plaintext with
#   "Hello, World!" over TLS with ALPN h2, e.g. the lab's actix-web peer,
#   lab/peers/rust/target/release/actix-tls-peer (built by ./scripts/lab protocols, or
#   `cargo build --release --locked --bin actix-tls-peer` in lab/peers/rust)
# env: ROUNDS (default 7), DURATION (wrk, default 3s), H2_REQUESTS (h2load -n, default 60000),
#   PORT (default 18400; B uses +1, nginx +2, C +3)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
a=$(realpath "$1")
b=$(realpath "$2")
c=${3:+$(realpath "$3")}
rounds=${ROUNDS:-7}
dur=${DURATION:-3s}
h2n=${H2_REQUESTS:-60000}
port_a=${PORT:-18400}
port_b=$((port_a + 1))
port_n=$((port_a + 2))
port_c=$((port_a + 3))
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The certificate and the lab's client OpenSSL setting, in "$work".
. "$(dirname "$0")/tls_setup.sh"

start() { # port command... (server on CPU 1, without the clients' OpenSSL setting)
  local port=$1
  shift
  ADDR=127.0.0.1:$port WORKERS=1 TLS_CERT=$work/cert.pem TLS_KEY=$work/key.pem \
    TMPDIR=$work taskset -c 1 "$@" >"$work/server-$port.log" 2>&1 &
  pids+=($!)
}
start "$port_a" "$a"
pid_a=${pids[-1]}
start "$port_b" "$b"
pid_b=${pids[-1]}
NGINX_CONF=nginx-tls.conf.in start "$port_n" "$root/lab/peers/nginx/run.sh"
pid_n=${pids[-1]}
specs=("$pid_a $port_a" "$pid_b $port_b")
ports="$port_a $port_b $port_n"
if [ -n "$c" ]; then
  start "$port_c" "$c"
  pid_c=${pids[-1]}
  specs+=("$pid_c $port_c")
  ports="$ports $port_c"
fi
specs+=("$pid_n $port_n")

export OPENSSL_CONF=$work/client.cnf
for port in $ports; do
  for _ in $(seq 100); do curl -fsk "https://127.0.0.1:$port/plaintext" >/dev/null 2>&1 && break; sleep 0.1; done
  body=$(curl -fsSk "https://127.0.0.1:$port/plaintext")
  [ "$body" = "Hello, World!" ] || { echo "port $port: unexpected body: $body" >&2; exit 1; }
  proto=$(curl -sk --http2 -o /dev/null -w '%{http_version}' "https://127.0.0.1:$port/plaintext")
  [ "$proto" = "2" ] || { echo "port $port: ALPN gave HTTP/$proto, not h2" >&2; exit 1; }
done

tree() { # pid and its descendants
  local p
  echo "$1"
  for p in $(pgrep -P "$1" || true); do tree "$p"; done
}
cpu_ns() { # ns on CPU of every thread of the process tree of $1
  local p
  for p in $(tree "$1"); do cat /proc/"$p"/task/*/schedstat 2>/dev/null || true; done |
    awk '{ s += $1 } END { printf "%.0f", s }'
}
measure() { # lane pid port -> CPU µs per request
  local lane=$1 pid=$2 port=$3 c0 c1 out n
  c0=$(cpu_ns "$pid")
  if [ "$lane" = https ]; then
    out=$(taskset -c 0 wrk -t1 -c50 -d"$dur" "https://127.0.0.1:$port/plaintext")
    c1=$(cpu_ns "$pid")
    ! echo "$out" | grep -q Non-2xx || { echo "port $port: non-2xx: $out" >&2; exit 1; }
    n=$(echo "$out" | awk '/requests in/ { print $1 }')
  else
    out=$(taskset -c 0 h2load -t1 -c50 -m10 -n"$h2n" "https://127.0.0.1:$port/plaintext" </dev/null)
    c1=$(cpu_ns "$pid")
    echo "$out" | grep -q "status codes: $h2n 2xx" || { echo "port $port: $out" >&2; exit 1; }
    echo "$out" | grep -q "ALPN: h2" || echo "$out" | grep -q "Application protocol: h2" ||
      { echo "port $port: h2load did not negotiate h2" >&2; exit 1; }
    n=$h2n
  fi
  awk -v c="$c1" -v c0="$c0" -v n="$n" 'BEGIN { printf "%.3f", (c - c0) / 1e3 / n }'
}

echo "A = $a"
echo "B = $b"
[ -z "$c" ] || echo "C = $c"
echo "N = nginx ($(nginx -v 2>&1)), $root/lab/peers/nginx/nginx-tls.conf.in"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
: >"$work/rounds"
for lane in https h2; do
  for spec in "${specs[@]}"; do # warm-up
    # shellcheck disable=SC2086
    measure "$lane" $spec >/dev/null
  done
  for i in $(seq "$rounds"); do
    row=()
    for spec in "${specs[@]}"; do
      # shellcheck disable=SC2086
      row+=("$(measure "$lane" $spec)")
    done
    # Columns: A B nginx [C] (C measured before nginx in each round).
    if [ -n "$c" ]; then row=("${row[0]}" "${row[1]}" "${row[3]}" "${row[2]}"); fi
    echo "$lane ${row[*]}" >>"$work/rounds"
    printf '%-5s round %d: A %s, B %s, nginx %s%s us/request (load %s)\n' "$lane" "$i" "${row[0]}" \
      "${row[1]}" "${row[2]}" "${c:+, C ${row[3]:-}}" "$(cut -d' ' -f1 /proc/loadavg)"
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work/rounds" <<'EOF'
import random, statistics, sys

rows = [line.split() for line in open(sys.argv[1])]
rng = random.Random(1)


def interval(values):
    meds = sorted(
        statistics.median(rng.choice(values) for _ in values) for _ in range(2000)
    )
    return meds[50], meds[1949]


for lane in ("https", "h2"):
    r = [tuple(map(float, x[1:])) for x in rows if x[0] == lane]
    series = [
        ("A us/req", [x[0] for x in r]),
        ("B us/req", [x[1] for x in r]),
        ("nginx us/req", [x[2] for x in r]),
        ("A/nginx", [x[0] / x[2] for x in r]),
        ("B/nginx", [x[1] / x[2] for x in r]),
        ("A/B", [x[0] / x[1] for x in r]),
    ]
    if r and len(r[0]) > 3:
        series += [
            ("C us/req", [x[3] for x in r]),
            ("A/C", [x[0] / x[3] for x in r]),
            ("B/C", [x[1] / x[3] for x in r]),
        ]
    for name, vals in series:
        lo, hi = interval(vals)
        print(f"== {lane:5} {name:13} median {statistics.median(vals):.3f} [95% {lo:.3f}, {hi:.3f}] ({len(vals)} rounds)")
EOF
