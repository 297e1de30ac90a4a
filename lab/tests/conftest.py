"""Shared fixtures: the lab package on sys.path and contract servers (correct or faulty)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

LAB = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
for p in (str(LAB), str(TESTS)):
    if p not in sys.path:
        sys.path.insert(0, p)

import contract_server  # noqa: E402


class RunningServer:
    def __init__(self, faults=()):
        self.httpd = contract_server.serve("127.0.0.1:0", set(faults))
        self.host, self.port = self.httpd.server_address[:2]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def contract_srv():
    """A server that answers the contract correctly, in a thread of the test process."""
    srv = RunningServer()
    yield srv
    srv.stop()


@pytest.fixture
def make_server():
    """Factory for servers with given faults; all stopped at the end of the test."""
    made = []

    def make(*faults):
        srv = RunningServer(faults)
        made.append(srv)
        return srv

    yield make
    for s in made:
        s.stop()


@pytest.fixture
def head_commit() -> str:
    """This checkout's HEAD: a report made there is 0 commits behind."""
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True
    ).stdout.strip()
