#!/usr/bin/env bash
# The floor's variants (floor.c: FLOOR_SCAN, FLOOR_WRITE) against each other, the two ways
# docs/performance.md ("The floor") reports them:
#
#   variants.sh instructions   user-space instructions per request under cachegrind at depths 1,
#                              16 and 256 (crates/peregrine-server/bench/instructions.sh; noise-free,
#                              valid on a busy machine), every scan x write
#   variants.sh cpu [OUT [ARGS]] server CPU (user + kernel) per request in the engine profile's four
#                              lanes, interleaved rounds (./scripts/lab engine, the registry's floor
#                              as "floor" and the variants as extra servers; default OUT
#                              lab/results/floor-variants; ARGS go to the lab, e.g. --dry-run)
#
# env: VARIANTS (scan:write pairs, default below), BASE_REF (also measure floor.c as it was at this
#      git ref, e.g. a commit before the variants), RUNS (cpu: rounds, default 8), N1/N2/DEPTHS
#      (instructions: passed on to instructions.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
variants=${VARIANTS:-"bytes:block memchr:block sse2:block avx2:block avx2:writev avx2:copy memmem:copy"}
build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT
gcc -O2 -pthread -Wall -Wextra -o "$build/floor" "$here/floor.c"
if [ -n "${BASE_REF:-}" ]; then
  git -C "$root" show "$BASE_REF:lab/peers/floor/floor.c" >"$build/floor-base.c"
  gcc -O2 -pthread -o "$build/floor-base" "$build/floor-base.c"
fi

case ${1:-} in
  instructions)
    for v in $variants; do
      echo "== FLOOR_SCAN=${v%%:*} FLOOR_WRITE=${v#*:}"
      FLOOR_SCAN=${v%%:*} FLOOR_WRITE=${v#*:} "$root/crates/peregrine-server/bench/instructions.sh" "$build/floor"
    done
    if [ -n "${BASE_REF:-}" ]; then
      echo "== floor.c at $BASE_REF"
      "$root/crates/peregrine-server/bench/instructions.sh" "$build/floor-base"
    fi
    ;;
  cpu)
    servers=()
    for v in $variants; do
      servers+=(--server "f-${v%%:*}-${v#*:}=env FLOOR_SCAN=${v%%:*} FLOOR_WRITE=${v#*:} $build/floor")
    done
    [ -z "${BASE_REF:-}" ] || servers+=(--server "floor-base=$build/floor-base;label=floor.c at $BASE_REF")
    "$root/scripts/lab" engine --servers floor "${servers[@]}" --reference floor \
      --runs "${RUNS:-8}" --out "${2:-$root/lab/results/floor-variants}" "${@:3}"
    ;;
  *)
    echo "usage: $0 instructions | cpu [OUT [LAB ARGS...]]" >&2
    exit 2
    ;;
esac
