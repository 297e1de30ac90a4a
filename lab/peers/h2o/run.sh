#!/bin/sh
# Starts the h2o peer in the foreground: writes h2o.conf (from h2o.conf.in, ADDR and WORKERS) into a
# fresh directory under $TMPDIR and execs h2o with it, so the process the lab started is h2o itself.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
contract=$(cd "$here/../../contract" && pwd)
addr=${ADDR:-127.0.0.1:8080}
workers=${WORKERS:-1}
case $workers in
    ''|*[!0-9]*|0) echo "WORKERS=$workers is not a positive integer" >&2; exit 2 ;;
esac
command -v h2o >/dev/null 2>&1 || { echo "h2o is not installed (apt-get install h2o)" >&2; exit 127; }
host=${addr%:*}
port=${addr##*:}

tmp=${TMPDIR:-/tmp}
for old in "$tmp"/peregrine-h2o.*; do
    [ -d "$old" ] || continue
    [ -n "$(find "$old" -maxdepth 0 -mmin +5)" ] || continue
    if [ -f "$old/h2o.pid" ] && kill -0 "$(cat "$old/h2o.pid")" 2>/dev/null; then continue; fi
    rm -rf "$old"
done
prefix=$(mktemp -d "$tmp/peregrine-h2o.XXXXXX")
sed -e "s|@WORKERS@|$workers|g" -e "s|@HOST@|$host|g" -e "s|@PORT@|$port|g" \
    -e "s|@PREFIX@|$prefix|g" -e "s|@HERE@|$here|g" -e "s|@CONTRACT@|$contract|g" \
    "$here/h2o.conf.in" >"$prefix/h2o.conf"
exec h2o -m master -c "$prefix/h2o.conf"
