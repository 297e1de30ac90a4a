"""Memory per idle connection of a running server: opens N connections of one kind, lets
them go idle, and reports the growth of the server's resident memory divided by N.

Usage: idle_memory.py PID HOST:PORT KIND [N]
KIND: tls (TLS handshake, then idle), h2c (HTTP/2 preface and SETTINGS exchanged, then idle),
h2tls (the same over TLS with ALPN h2), plain (TCP connected, one HTTP/1.1 request answered).
"""

import socket
import ssl
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
SETTINGS_ACK = b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def read_frame(sock) -> tuple[int, int]:
    head = b""
    while len(head) < 9:
        chunk = sock.recv(9 - len(head))
        if not chunk:
            raise RuntimeError("closed")
        head += chunk
    length = int.from_bytes(head[:3], "big")
    left = length
    while left:
        left -= len(sock.recv(left))
    return head[3], head[4]


def open_one(host: str, port: int, kind: str):
    sock = socket.create_connection((host, port))
    if kind in ("tls", "h2tls"):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.set_alpn_protocols(["h2"] if kind == "h2tls" else ["http/1.1"])
        sock = ctx.wrap_socket(sock, server_hostname="localhost")
    if kind in ("h2c", "h2tls"):
        sock.sendall(PREFACE + SETTINGS)
        while True:
            kind_, flags = read_frame(sock)
            if kind_ == 4 and not flags & 1:
                break
        sock.sendall(SETTINGS_ACK)
    if kind in ("plain", "tls"):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        sock.recv(65536)
    return sock


def main() -> None:
    pid, target, kind = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 2000
    host, port = target.rsplit(":", 1)
    warm = [open_one(host, int(port), kind) for _ in range(50)]
    time.sleep(1)
    before = rss_kib(pid)
    conns = [open_one(host, int(port), kind) for _ in range(n)]
    time.sleep(2)
    after = rss_kib(pid)
    print(
        f"{kind}: {n} idle connections, RSS {before} -> {after} KiB, {(after - before) / n:.2f} KiB each"
    )
    for c in conns + warm:
        c.close()


if __name__ == "__main__":
    main()
