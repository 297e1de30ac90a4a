#!/bin/sh
# Starts the nginx peer in the foreground: writes nginx.conf (from nginx.conf.in, ADDR and WORKERS)
# into a fresh directory under $TMPDIR and execs nginx there, so the process the lab started IS the
# nginx master: SIGTERM to it stops nginx and its workers (fast shutdown).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
contract=$(cd "$here/../../contract" && pwd)
addr=${ADDR:-127.0.0.1:8080}
workers=${WORKERS:-1}
case $workers in
    ''|*[!0-9]*|0) echo "WORKERS=$workers is not a positive integer" >&2; exit 2 ;;
esac
command -v nginx >/dev/null 2>&1 || { echo "nginx is not installed (apt-get install nginx-light)" >&2; exit 127; }

tmp=${TMPDIR:-/tmp}
# Directories of earlier runs whose nginx has exited are removed (an exec'd nginx cannot clean up).
for old in "$tmp"/peregrine-nginx.*; do
    [ -d "$old" ] || continue
    if [ -f "$old/nginx.pid" ] && kill -0 "$(cat "$old/nginx.pid")" 2>/dev/null; then
        continue
    fi
    # A directory without a pid file may belong to an nginx that is still starting.
    [ -f "$old/nginx.pid" ] || [ -n "$(find "$old" -maxdepth 0 -mmin +5)" ] || continue
    rm -rf "$old"
done

prefix=$(mktemp -d "$tmp/peregrine-nginx.XXXXXX")
chmod 755 "$prefix"   # nginx workers run as an unprivileged user when started as root
# NGINX_CONF picks the template (nginx-tls.conf.in for the protocols lanes, with TLS_CERT/TLS_KEY).
template=${NGINX_CONF:-nginx.conf.in}
sed -e "s|@WORKERS@|$workers|g" -e "s|@ADDR@|$addr|g" -e "s|@PREFIX@|$prefix|g" \
    -e "s|@CONTRACT@|$contract|g" -e "s|@TLS_CERT@|${TLS_CERT:-}|g" -e "s|@TLS_KEY@|${TLS_KEY:-}|g" \
    "$here/$template" >"$prefix/nginx.conf"

exec nginx -p "$prefix" -c "$prefix/nginx.conf" -e stderr -g 'daemon off;'
