"""Traffic for the README's scrape of examples/observability.rs: ordinary requests, then each
kind of refusal the engine makes by itself, then the scrape.

Start the example first, with short timeouts and a small connection cap so the refusals happen
within seconds:

    ADDR=127.0.0.1:8080 WORKERS=1 IDLE_TIMEOUT=2 HEADER_TIMEOUT=1 MAX_CONNECTIONS=4 \
      RATE_LIMIT=5 OTEL_STDOUT=0 target/release/examples/observability > /tmp/access.log
    python3 crates/peregrine/bench/observability-traffic.py 127.0.0.1:8080 > /tmp/scrape.txt
"""

import socket
import sys
import time

HOST, PORT = sys.argv[1].rsplit(":", 1) if len(sys.argv) > 1 else ("127.0.0.1", "8080")
ADDR = (HOST, int(PORT))


def connect():
    s = socket.create_connection(ADDR)
    s.settimeout(10)
    return s


def read_response(s, head=False):
    """One response with Content-Length (all the example sends here)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            return buf
        buf += chunk
    head_part, rest = buf.split(b"\r\n\r\n", 1)
    length = 0
    for line in head_part.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    if head:
        length = 0
    while len(rest) < length:
        rest += s.recv(65536)
    return head_part + b"\r\n\r\n" + rest


def request(path, method="GET", headers=""):
    s = connect()
    s.sendall(f"{method} {path} HTTP/1.1\r\nHost: demo\r\n{headers}\r\n".encode())
    out = read_response(s, head=method == "HEAD")
    s.close()
    return out


def until_closed(s):
    """Reads until the server closes the connection; returns what it sent."""
    out = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except OSError:
        return out


def main():
    tp = "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\n"
    request("/hello/ada", headers=tp + "x-request-id: demo-1\r\n")
    for _ in range(3):
        request("/plaintext")
    request("/slow")
    request("/nope")
    request("/hello/bob", method="HEAD")
    request("/readyz")
    # Past RATE_LIMIT (5/s, burst 10): 429s.
    for _ in range(12):
        request("/plaintext")

    # 400: a control byte in the target.
    s = connect()
    s.sendall(b"GET /\x01 HTTP/1.1\r\nHost: demo\r\n\r\n")
    until_closed(s)
    # 431: a header section over the limit.
    s = connect()
    s.sendall(b"GET / HTTP/1.1\r\nHost: demo\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n")
    until_closed(s)
    # 408: a head that never ends (HEADER_TIMEOUT); and a connection that sends nothing.
    partial, silent = connect(), connect()
    partial.sendall(b"GET / HTTP/1.1\r\nHost: demo\r\n")
    until_closed(partial)
    until_closed(silent)
    # An idle keep-alive connection closed after IDLE_TIMEOUT.
    idle = connect()
    idle.sendall(b"GET /plaintext HTTP/1.1\r\nHost: demo\r\n\r\n")
    read_response(idle)
    until_closed(idle)
    # MAX_CONNECTIONS (4): four idle keep-alive connections, then a fifth waits and the oldest
    # idle one is closed to make room.
    time.sleep(1.2)  # the rate limiter's bucket refills
    held = []
    for _ in range(4):
        c = connect()
        c.sendall(b"GET /livez HTTP/1.1\r\nHost: demo\r\n\r\n")
        read_response(c)
        held.append(c)
    fifth = connect()
    fifth.sendall(b"GET /livez HTTP/1.1\r\nHost: demo\r\n\r\n")
    read_response(fifth)
    for c in held + [fifth]:
        c.close()
    # The workers report their counts at each sweeper tick.
    time.sleep(1.5)
    sys.stdout.write(request("/metrics").split(b"\r\n\r\n", 1)[1].decode())


if __name__ == "__main__":
    main()
