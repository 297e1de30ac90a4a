#!/usr/bin/env bash
# The chat example in headless Chromium over HTTPS + HTTP/2 (chat.py): WebSocket between two
# tabs, server-sent events in a third, screenshots and logs kept in target/browser/.
# Chromium comes from scripts/setup (Debian's package). A step of ./scripts/test.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
# The build the conformance step makes too (same features), so CI builds it once.
cargo build -q -p peregrine --example chat --features tls,http2,ws
exec timeout 300 python3 crates/peregrine/tests/browser/chat.py \
  target/debug/examples/chat target/browser
