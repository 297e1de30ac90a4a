#!/usr/bin/env bash
# CI: the resource attacks (probe/attacks.py) against the Peregrine scenarios server, with a
# static directory holding an 8 MiB file, write and body timeouts of 3 s, HTTP/2 (h2c) and the
# WebSocket echo on: each attack must stay within its memory budget and be cut by the server's
# own timeouts. Writes probe/out/attacks.json. The server is killed on exit, whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p peregrine --example scenarios --features tls,http2,ws
bin="$target_dir/release/examples/scenarios"

work="$(mktemp -d)"
head -c $((8 * 1024 * 1024)) /dev/urandom > "$work/large.bin"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
mkdir -p probe/out
env ADDR="127.0.0.1:$port" WORKERS=2 STATIC_DIR="$work" WRITE_TIMEOUT=3 BODY_TIMEOUT=3 \
    HEADER_TIMEOUT=3 "$bin" > probe/out/attacks-server.log 2>&1 &
server_pid=$!
cleanup() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT INT TERM
for _ in $(seq 1 150); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
    kill -0 "$server_pid" 2>/dev/null || { cat probe/out/attacks-server.log >&2; exit 1; }
    sleep 0.2
done
python3 probe/attacks.py --target "127.0.0.1:$port" --server-pid "$server_pid" \
    --json probe/out/attacks.json --large-path /files/large.bin --write-timeout 3 --body-timeout 3 \
    --require
