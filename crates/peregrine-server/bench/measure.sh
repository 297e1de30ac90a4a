#!/usr/bin/env bash
# Server CPU time per request and memory per idle connection, the way docs/measuring.md
# describes: each server pinned to CPU 1 with WORKERS=1, wrk -t1 pinned to CPU 0, utime+stime of
# every server thread read from /proc before and after, divided by the responses wrk counted.
# Several binaries given in one invocation are measured one after the other in the same run, so
# their ratios are comparable.
#
# usage: bench/measure.sh [BINARY...]   (each must listen on $ADDR, honour WORKERS and answer
#        GET /plaintext with "Hello, World!")
#   default: the release hello example (cargo build --release -p peregrine-server --example hello),
#   then the lab's floor program and hyper peer if they are built (lab/peers/floor/floor,
#   lab/peers/rust/target/release/hyper-peer). The first binary is compared with the others:
#   a summary prints its ratios against each.
# env: DURATION (default 5s), PORT (default 18080), IDLE_CONNS (default 5000)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
if [ $# -eq 0 ]; then
  set -- "${CARGO_TARGET_DIR:-$root/target}/release/examples/hello"
  for peer in "$root/lab/peers/floor/floor" "$root/lab/peers/rust/target/release/hyper-peer"; do
    [ -x "$peer" ] && set -- "$@" "$peer"
  done
fi
summary=$(mktemp)
path=/plaintext
port=${PORT:-18080}
dur=${DURATION:-5s}
idle_n=${IDLE_CONNS:-5000}
url="http://127.0.0.1:$port$path"
tck=$(getconf CLK_TCK)

measure_one() {
bin=$1
echo "== $bin"
(cd "$(dirname "$bin")" && ADDR=127.0.0.1:$port WORKERS=1 exec taskset -c 1 "$bin") &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -fs "$url" >/dev/null 2>&1 && break; sleep 0.1; done
body=$(curl -fsS "$url")
[ "$body" = "Hello, World!" ] || { echo "unexpected body: $body" >&2; exit 1; }

cpu() { # clock ticks used by every thread of the server
  cat /proc/$pid/task/*/stat | awk '{ s += $14 + $15 } END { print s }'
}

run() { # label, wrk args...
  local label=$1; shift
  taskset -c 0 wrk -t1 "$@" -d2s "$url" >/dev/null # warm-up
  local c0; c0=$(cpu)
  local out; out=$(taskset -c 0 wrk -t1 "$@" -d"$dur" "$url")
  local c1; c1=$(cpu)
  local n; n=$(echo "$out" | awk '/requests in/ { print $1 }')
  local rps; rps=$(echo "$out" | awk '/Requests\/sec/ { print $2 }')
  local non2xx; non2xx=$(echo "$out" | awk '/Non-2xx/ { print $NF }')
  awk -v l="$label" -v c=$((c1 - c0)) -v n="$n" -v t="$tck" -v r="$rps" -v e="${non2xx:-0}" \
    'BEGIN { printf "%-28s %8.3f us/request  (%d ticks, %d responses, %s req/s, non-2xx %s)\n", l, c / t * 1e6 / n, c, n, r, e }'
  awk -v b="$(basename "$bin")" -v l="$label" -v c=$((c1 - c0)) -v n="$n" -v t="$tck" \
    'BEGIN { printf "%s\t%s\t%.4f\n", b, l, c / t * 1e6 / n }' >>"$summary"
}
run "c=50" -c50
run "c=64, 16 pipelined" -c64 -s "$here/pipeline.lua"

# Memory per idle keep-alive connection: RSS growth after IDLE_CONNS connections each sent one
# request, read the answer and stay open.
rss() { awk '/VmRSS/ { print $2 }' /proc/$pid/status; }
r0=$(rss)
python3 - "$port" "$idle_n" "$pid" <<'PY'
import socket, sys, time
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
req = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
conns = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(req)
    got = b""
    while not got.endswith(b"Hello, World!"):
        got += s.recv(4096)
    conns.append(s)
time.sleep(1)
rss = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1]
print(rss, flush=True)
open("/tmp/peregrine-idle-rss", "w").write(rss)
for s in conns:
    s.close()
PY
r1=$(cat /tmp/peregrine-idle-rss)
awk -v a="$r0" -v b="$r1" -v n="$idle_n" \
  'BEGIN { printf "idle memory: RSS %d KiB -> %d KiB with %d connections: %.0f bytes/connection\n", a, b, n, (b - a) * 1024 / n }'
awk -v bn="$(basename "$bin")" -v a="$r0" -v b="$r1" -v n="$idle_n" \
  'BEGIN { printf "%s\tidle bytes/connection\t%.0f\n", bn, (b - a) * 1024 / n }' >>"$summary"
kill $pid
wait $pid 2>/dev/null || true
trap - EXIT
}

for b in "$@"; do
  measure_one "$(realpath "$b")"
done

echo
echo "== summary (same run; ratio = $(basename "$1") / other)"
awk -F'\t' '
  NR == FNR { v[$1 FS $2] = $3; if (!($1 in seen)) { seen[$1] = 1; order[++k] = $1 }; if (!($2 in ms)) { ms[$2] = 1; mo[++m] = $2 }; next }
  END {
    first = order[1]
    for (j = 1; j <= m; j++) {
      line = sprintf("%-24s %s %.3f", mo[j], first, v[first FS mo[j]])
      for (i = 2; i <= k; i++) {
        o = order[i]; x = v[o FS mo[j]]
        line = line sprintf(" | %s %.3f (ratio %.2f)", o, x, x > 0 ? v[first FS mo[j]] / x : 0)
      }
      print line
    }
  }' "$summary" "$summary"
rm -f "$summary"
