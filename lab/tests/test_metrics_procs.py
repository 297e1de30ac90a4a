"""/proc readings and process management, against real child processes."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from peregrine_lab import metrics, procs
from peregrine_lab.peers import load_contract

TESTS = Path(__file__).resolve().parent

# A parent that starts two children which each burn CPU, then everyone sleeps.
TREE = """
import os, subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c",
        "import time\\nt=time.process_time()\\n"
        "while time.process_time()-t<0.3: pass\\ntime.sleep(60)"])
        for _ in range(2)]
print("ready", flush=True)
time.sleep(60)
"""


def _wait_for(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.02)
    return False


def test_tree_cpu_and_memory_cover_children(tmp_path):
    srv = procs.start_server(
        [sys.executable, "-c", TREE], tmp_path, dict(os.environ), None, tmp_path / "tree.log"
    )
    try:
        before = metrics.Sample.take(srv.pid)
        assert _wait_for(lambda: len(metrics.process_tree(srv.pid)) == 3)
        # Both children burn 0.3 s of CPU; the tree's total must show it.
        assert _wait_for(lambda: metrics.Sample.take(srv.pid).cpu_since(before) >= 0.5)
        s = metrics.Sample.take(srv.pid)
        assert len(s.pids) == 3
        assert s.rss > 0 and s.peak_rss >= s.rss
        assert metrics.reset_peak_rss(s.pids)
    finally:
        srv.stop()
    # The whole group is gone, children included.
    assert _wait_for(lambda: metrics.process_tree(srv.pid) == [])
    assert not srv.alive()


def test_cpu_since_ignores_processes_that_died():
    a = metrics.Sample(cpu={1: 1.0, 2: 5.0}, rss=0, peak_rss=0)
    b = metrics.Sample(cpu={1: 1.5, 3: 0.25}, rss=0, peak_rss=0)  # 2 died, 3 was born
    assert b.cpu_since(a) == pytest.approx(0.75)


def test_cpu_since_keeps_the_time_of_threads_that_exited():
    tick = 1.0 / metrics.CLK_TCK
    a = metrics.Sample(cpu={1: 1.0}, rss=0, peak_rss=0, ticks={1: 1.0})
    # Live threads gained 5 ms; the process total gained 300 ms: a thread that ran and exited.
    b = metrics.Sample(cpu={1: 1.005}, rss=0, peak_rss=0, ticks={1: 1.3})
    assert b.cpu_since(a) == pytest.approx(0.3)
    # Within two ticks the precise reading stands (truncation, not lost threads).
    c = metrics.Sample(cpu={1: 1.005}, rss=0, peak_rss=0, ticks={1: 1.0 + 2 * tick})
    assert c.cpu_since(a) == pytest.approx(0.005)


# A thread-per-task process: each thread burns CPU and exits before the second sample.
SHORT_THREADS = """
import threading, time, sys
def burn():
    t = time.thread_time()
    while time.thread_time() - t < 0.1: pass
sys.stdin.readline()
for _ in range(3):
    th = threading.Thread(target=burn); th.start(); th.join()
print("done", flush=True)
time.sleep(60)
"""


def test_tree_cpu_counts_threads_that_ran_and_exited_between_samples():
    p = subprocess.Popen(
        [sys.executable, "-c", SHORT_THREADS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait_for(lambda: metrics.process_tree(p.pid) == [p.pid])
        before = metrics.Sample.take(p.pid)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "done"
        # 0.3 s burned in threads that are gone: the live-thread reading alone sees ~0.
        assert metrics.Sample.take(p.pid).cpu_since(before) >= 0.25
    finally:
        p.kill()
        p.wait()


def test_stat_parsing_survives_odd_command_names(tmp_path):
    exe = tmp_path / "we ird) (name"
    exe.symlink_to(sys.executable)
    p = subprocess.Popen([str(exe), "-c", "import time; time.sleep(30)"])
    try:
        assert _wait_for(lambda: metrics.process_tree(p.pid) == [p.pid])
        assert metrics.cpu_seconds([p.pid]) >= 0.0
    finally:
        p.kill()
        p.wait()


def test_start_failure_and_port_wait(tmp_path):
    srv = procs.start_server(
        [sys.executable, "-c", "import sys; sys.exit(3)"],
        tmp_path,
        dict(os.environ),
        None,
        tmp_path / "fail.log",
    )
    with pytest.raises(procs.StartError, match="exited with status 3"):
        procs.wait_for_port("127.0.0.1", 9, srv.proc, timeout=10)
    srv.stop()
    with pytest.raises(procs.StartError, match="cannot run"):
        procs.start_server(["/nonexistent/server"], tmp_path, {}, None, tmp_path / "x.log")


def test_port_in_use():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        assert procs.port_in_use("127.0.0.1", port)
    finally:
        s.close()
    assert not procs.port_in_use("127.0.0.1", port)


def test_idle_memory_counts_connections(tmp_path):
    port_sock = socket.socket()
    port_sock.bind(("127.0.0.1", 0))
    port = port_sock.getsockname()[1]
    port_sock.close()
    env = dict(os.environ, ADDR=f"127.0.0.1:{port}")
    srv = procs.start_server(
        [sys.executable, "contract_server.py"], TESTS, env, None, tmp_path / "srv.log"
    )
    try:
        procs.wait_for_port("127.0.0.1", port, srv.proc, timeout=20)
        scen = load_contract().by_name("plaintext")
        im = metrics.idle_memory("127.0.0.1", port, srv.pid, scen, 40, settle=0.2)
        assert im.error is None
        assert im.opened == 40
        assert im.rss_after > 0 and im.rss_before > 0
        # A thread per connection in this server: the growth is real and positive.
        assert im.per_connection > 0
        assert im.to_json()["per_connection_bytes"] == im.per_connection
    finally:
        srv.stop()


def test_cpu_busy_seconds_grows_while_a_cpu_works():
    cpu = sorted(os.sched_getaffinity(0))[0]
    before = metrics.cpu_busy_seconds([cpu])
    p = subprocess.Popen(
        [
            "taskset",
            "-c",
            str(cpu),
            sys.executable,
            "-c",
            "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass",
        ]
    )
    p.wait()
    # The child burnt 0.3 s on that CPU; the CPU's busy time grew at least by most of it.
    assert metrics.cpu_busy_seconds([cpu]) - before >= 0.25
    assert metrics.cpu_busy_seconds([]) == 0.0
