#!/bin/sh
# Caddy with the lane's environment (ADDR host:port, WORKERS, TLS_CERT, TLS_KEY): its data and
# config folders beside it (.state, ignored by git), GOMAXPROCS=WORKERS as for every Go peer.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
HOST=${ADDR%:*}
export HOST GOMAXPROCS="${WORKERS:-1}"
state="$here/.state"
mkdir -p "$state"
export XDG_DATA_HOME="$state" XDG_CONFIG_HOME="$state"
exec "$here/bin/caddy" run --adapter caddyfile --config "$here/Caddyfile"
