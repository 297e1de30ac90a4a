#!/usr/bin/env bash
# Server CPU time per plaintext request with observability off and on, measured by
# cpu-per-request.sh (same method: server on CPU 1 with one worker, wrk on CPU 0, utime+stime of
# the server's threads / responses), for Peregrine's observability example and, if built, axum
# with tower-http's TraceLayer (lab/peers/rust, binary axum-trace-peer).
#
# usage: crates/peregrine/bench/observability-cost.sh [SECONDS] [CONNECTIONS] [ROUNDS]
# needs: cargo build --release -p peregrine --features opentelemetry,metrics,rate-limit --example observability
#        (cd lab/peers/rust && cargo build --release --bin axum-trace-peer)   # optional
#
# Modes (env OBS of the servers):
#   off    no layers, no subscriber
#   trace  one span per request + one access-log event, tracing-subscriber fmt to stdout
#          (stdout is /dev/null here, so formatting is paid, a terminal is not)
#   full   trace + RequestId + Prometheus metrics + engine-event observer + OpenTelemetry spans
#          (batch exporter; OTEL_STDOUT=0: the SDK's no-op exporter, =1: the stdout exporter)
set -euo pipefail
DUR=${1:-10}
CONNS=${2:-50}
ROUNDS=${3:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
PEREGRINE=$ROOT/target/release/examples/observability
AXUM=$ROOT/lab/peers/rust/target/release/axum-trace-peer
export PATHS=/plaintext

run() { # label, binary, env...
  local label=$1 bin=$2
  shift 2
  local out
  out=$(env "$@" "$HERE/cpu-per-request.sh" "$bin" "$DUR" "$CONNS" "$ROUNDS")
  echo "$out" | sed "s/^/$label /"
  echo "RESULT $label $(echo "$out" | awk '/^median/ {print $3}')"
}

run peregrine-off "$PEREGRINE" OBS=off
run peregrine-trace "$PEREGRINE" OBS=trace
run peregrine-full-noop-export "$PEREGRINE" OBS=full OTEL_STDOUT=0
run peregrine-full-stdout-export "$PEREGRINE" OBS=full OTEL_STDOUT=1
if [ -x "$AXUM" ]; then
  run axum-off "$AXUM" OBS=off
  run axum-tracelayer "$AXUM" OBS=trace
else
  echo "skip axum: $AXUM not built" >&2
fi
