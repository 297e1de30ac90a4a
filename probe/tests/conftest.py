"""Shared fixtures: the probe package on sys.path, the lenient toy server and a reject-all server."""

from __future__ import annotations

import os
import socket
import sys
import threading

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import lenient_server


@pytest.fixture(scope="session")
def lenient_port():
    srv, port = lenient_server.start()
    yield port
    srv.shutdown()
    srv.server_close()


class _RejectAll:
    """The opposite control: reads a request head, answers 400 with Connection: close and closes.

    It passes every reject case whose statuses include 400 and that expects no prior response,
    and fails every accept case, which pins the verdict logic from the other side.
    """

    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _handle(conn):
        conn.settimeout(2)
        try:
            data = b""
            while b"\n" not in data:
                d = conn.recv(65536)
                if not d:
                    break
                data += d
            if data:
                conn.sendall(
                    b"HTTP/1.1 400 Bad Request\r\nDate: Sun, 22 Nov 2026 00:00:00 GMT\r\nServer: reject-all\r\n"
                    b"Connection: close\r\nContent-Length: 0\r\n\r\n"
                )
            conn.shutdown(socket.SHUT_WR)
            # Drain briefly so the client sees FIN, not RST, before we close.
            conn.settimeout(0.2)
            try:
                while conn.recv(65536):
                    pass
            except OSError:
                pass
        except OSError:
            pass
        finally:
            conn.close()


@pytest.fixture(scope="session")
def reject_all_port():
    srv = _RejectAll()
    yield srv.port
    srv.stop = True
    srv.sock.close()
