"""Resource attacks (category R): clients that make a server hold memory, descriptors or CPU they
did not pay for, measured on the server process itself.

Each attack opens its attacking connections, holds them for a while, samples the server (VmRSS
and open descriptors summed over the process tree, CPU time) every ``sample_every`` seconds,
then lets go and checks that the server came back. Its verdict is against a budget:

- ``peak_growth_kib``: the most RSS may grow over the baseline while the attack runs (default
  32 MiB for 100 attacking connections);
- ``after_growth_kib``: how far above the baseline RSS may stay once the server has cut the
  attackers (by its own timeouts: the attackers never close first), or once they left;
- the server keeps answering a fresh client during the attack (``served``), and for the
  attacks a timeout must end, the server closes the attacking connections by itself within
  ``cut_within`` seconds.

Standard library only, like the rest of the probe: HTTP/2 frames and the WebSocket handshake are
written by hand (an HPACK literal needs no table), so the probe runs where nothing is installed.
"""

from __future__ import annotations

import base64
import os
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

GET_PLAIN = b"GET /plaintext HTTP/1.1\r\nHost: probe\r\n\r\n"


@dataclass
class AttackOptions:
    """What the attacks need to know about the server under test."""

    host: str = "127.0.0.1"
    port: int = 8080
    server_pid: int = 0
    # A path whose response is large (several MiB: a static file), for the slow readers.
    large_path: str = "/files/large.bin"
    # The server's write timeout (s): a reader that takes nothing is cut after about this.
    write_timeout: float = 3.0
    # The server's body timeout (s): a stalled upload is cut after about this.
    body_timeout: float = 3.0
    connections: int = 100
    peak_budget_kib: int = 32 * 1024
    after_budget_kib: int = 8 * 1024
    sample_every: float = 0.1
    # Which optional protocols the server speaks (attacks on others are reported n/a).
    h2c: bool = True
    websocket_path: str | None = "/ws"


@dataclass
class Sample:
    t: float
    rss_kib: int
    fds: int
    cpu_s: float


@dataclass
class Sampler:
    """Samples the server's process tree in a thread until stopped."""

    pid: int
    every: float
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread:
            self._thread.join()
        return self.samples

    def _run(self) -> None:
        while not self._stop.is_set():
            s = measure(self.pid)
            if s:
                self.samples.append(s)
            self._stop.wait(self.every)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (forked workers of multi-process peers)."""
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        if p in out:
            continue
        out.append(p)
        try:
            for tid in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    stack += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def measure(pid: int) -> Sample | None:
    """RSS (KiB), open descriptors and CPU seconds of the process tree, now."""
    rss = fds = 0
    cpu = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    procs = process_tree(pid)
    for p in procs:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss += int(line.split()[1])
                        break
            fds += len(os.listdir(f"/proc/{p}/fd"))
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            if p == pid:
                return None
    return Sample(time.monotonic(), rss, fds, cpu)


def _connect(o: AttackOptions, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        # A small receive window: the server's sends fill it at once and then stall.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(5)
    s.connect((o.host, o.port))
    return s


def served(o: AttackOptions, timeout: float = 2.0) -> bool:
    """Whether a fresh client gets a 200 for GET /plaintext within ``timeout``."""
    try:
        with socket.create_connection((o.host, o.port), timeout) as s:
            s.settimeout(timeout)
            s.sendall(GET_PLAIN)
            data = s.recv(4096)
            return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def _wait_cut(socks: list[socket.socket], within: float, sample_served, o) -> tuple[int, float, bool]:
    """Waits until the server has closed every attacking socket or ``within`` passes; returns
    how many it closed, when the last went, and whether a fresh client was served meanwhile."""
    t0 = time.monotonic()
    open_ = list(socks)
    ok_served = True
    checked = False
    while open_ and time.monotonic() - t0 < within:
        time.sleep(0.2)
        if not checked and sample_served:
            ok_served = served(o)
            checked = True
        open_ = [s for s in open_ if not _closed_quietly(s)]
    return len(socks) - len(open_), time.monotonic() - t0, ok_served


def _closed_quietly(s: socket.socket) -> bool:
    """Whether the server has closed ``s``, reading nothing (a slow reader must stay slow): a
    socket the server closed shows as readable with EOF or an error pending (POLLRDHUP)."""
    import select

    p = select.poll()
    p.register(s, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
    return bool(p.poll(0))


def _verdict(aid: str, description: str, o: AttackOptions, run) -> dict:
    """Baseline, the attack under the sampler, recovery; the result against the budgets."""
    base = measure(o.server_pid)
    if base is None:
        return {"id": aid, "passed": False, "observed": "server process not found", "details": {}}
    sampler = Sampler(o.server_pid, o.sample_every).start()
    t0 = time.monotonic()
    try:
        outcome = run()
    except OSError as e:
        outcome = {"error": f"{type(e).__name__}: {e}"}
    samples = sampler.stop()
    # Recovery: the attackers are gone (closed by the server or by us at the end of run()).
    time.sleep(0.5)
    after = measure(o.server_pid) or base
    peak = max([s.rss_kib for s in samples] + [base.rss_kib])
    peak_fds = max([s.fds for s in samples] + [base.fds])
    wall = time.monotonic() - t0
    cpu = (samples[-1].cpu_s - base.cpu_s) if samples else 0.0
    details = {
        "baseline_rss_kib": base.rss_kib,
        "peak_rss_kib": peak,
        "after_rss_kib": after.rss_kib,
        "peak_growth_kib": peak - base.rss_kib,
        "after_growth_kib": after.rss_kib - base.rss_kib,
        "baseline_fds": base.fds,
        "peak_fds": peak_fds,
        "after_fds": after.fds,
        "cpu_share": round(cpu / wall, 3) if wall > 0 else 0.0,
        "seconds": round(wall, 2),
        "samples": len(samples),
        "budget_peak_kib": o.peak_budget_kib,
        "budget_after_kib": o.after_budget_kib,
        **outcome,
    }
    problems = []
    if "error" in outcome:
        problems.append(outcome["error"])
    if details["peak_growth_kib"] > o.peak_budget_kib:
        problems.append(f"RSS grew {details['peak_growth_kib'] // 1024} MiB (budget {o.peak_budget_kib // 1024})")
    if details["after_growth_kib"] > o.after_budget_kib:
        problems.append(f"RSS stayed {details['after_growth_kib'] // 1024} MiB above its baseline afterwards")
    if after.fds > base.fds + 4:
        problems.append(f"{after.fds - base.fds} descriptors still open afterwards")
    if outcome.get("served") is False:
        problems.append("a fresh client was not served during the attack")
    if outcome.get("must_cut") and outcome.get("cut", 0) < outcome.get("attackers", 0):
        problems.append(f"only {outcome['cut']} of {outcome['attackers']} attackers were cut by the server")
    observed = "; ".join(problems) or (
        f"peak +{details['peak_growth_kib'] // 1024} MiB, after +{max(0, details['after_growth_kib']) // 1024} MiB"
    )
    return {
        "id": aid,
        "category": "R",
        "description": description,
        "expected": "bounded memory and descriptors, attackers cut by the server's timeouts, others served",
        "passed": not problems,
        "skipped": False,
        "observed": observed,
        "details": details,
    }


def _hold(o: AttackOptions, send: bytes, rcvbuf: int | None, within: float) -> dict:
    """Opens ``o.connections`` attackers that each send ``send`` (as much of it as the socket
    takes at once) and then neither read nor write; waits up to ``within`` for the server to
    cut them, checking meanwhile that a fresh client is served; then lets go."""
    socks = []
    for _ in range(o.connections):
        s = _connect(o, rcvbuf=rcvbuf)
        s.setblocking(False)
        try:
            s.send(send)
        except BlockingIOError:
            pass
        s.setblocking(True)
        socks.append(s)
    cut, took, ok = _wait_cut(socks, within, True, o)
    for s in socks:
        s.close()
    return {"attackers": len(socks), "cut": cut, "cut_after_s": round(took, 2), "served": ok, "must_cut": True}


def _get_large(o: AttackOptions) -> bytes:
    return b"GET %s HTTP/1.1\r\nHost: probe\r\n\r\n" % o.large_path.encode()


def slow_read_large(o: AttackOptions) -> dict:
    """R-slow-read: ``connections`` clients each ask for a large body and never read it."""
    return _verdict(
        "R-slow-read",
        f"{o.connections} clients GET {o.large_path} and never read",
        o,
        lambda: _hold(o, _get_large(o), 4096, o.write_timeout * 3 + 5),
    )


def pipeline_no_read(o: AttackOptions) -> dict:
    """R-pipeline-no-read: clients pipeline requests for the large body without reading."""
    return _verdict(
        "R-pipeline-no-read",
        f"{o.connections} clients pipeline 64 GETs each, never read",
        o,
        lambda: _hold(o, _get_large(o) * 64, 4096, o.write_timeout * 3 + 5),
    )


def stalled_upload(o: AttackOptions) -> dict:
    """R-stalled-upload: clients announce a 1 MiB body, send 100 bytes, then nothing."""
    head = b"POST /users HTTP/1.1\r\nHost: probe\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
    return _verdict(
        "R-stalled-upload",
        f"{o.connections} clients stall an upload after 100 bytes",
        o,
        lambda: _hold(o, head + b"{" + b" " * 99, None, o.body_timeout * 3 + 5),
    )


# HTTP/2 by hand (RFC 9113 frames, RFC 7541 literals): enough to open streams and hold windows.
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _hpack_int(value: int, prefix_bits: int, first: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def _hpack_literal(name_index: int, value: bytes) -> bytes:
    """A literal field without indexing, its name from the static table, its value raw."""
    return _hpack_int(name_index, 4, 0x00) + _hpack_int(len(value), 7, 0x00) + value


def h2_get(stream: int, path: str, authority: str = "probe") -> bytes:
    """HEADERS (END_STREAM | END_HEADERS) for GET ``path`` over http."""
    block = b"\x82\x86" + _hpack_literal(4, path.encode()) + _hpack_literal(1, authority.encode())
    return h2_frame(0x1, 0x5, stream, block)


def _h2_open(o: AttackOptions, settings: bytes) -> socket.socket:
    s = _connect(o)
    s.sendall(PREFACE + h2_frame(0x4, 0, 0, settings))
    return s


def _h2_ack_settings(s: socket.socket, until: float) -> None:
    """Reads frames until the server's SETTINGS arrives (or ``until``) and acknowledges it."""
    buf = bytearray()
    s.settimeout(0.2)
    try:
        while time.monotonic() < until:
            try:
                data = s.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            buf += data
            while len(buf) >= 9:
                n = int.from_bytes(buf[:3], "big")
                if len(buf) < 9 + n:
                    break
                kind, flags = buf[3], buf[4]
                del buf[: 9 + n]
                if kind == 0x4 and not flags & 0x1:
                    s.sendall(h2_frame(0x4, 0x1, 0, b""))
                    return
    finally:
        s.settimeout(5)


def _goaway_or_closed(s: socket.socket, within: float) -> str:
    """Reads (and discards) until GOAWAY, EOF or ``within``: "goaway", "closed" or ""."""
    s.settimeout(0.2)
    t0 = time.monotonic()
    buf = bytearray()
    while time.monotonic() - t0 < within:
        try:
            data = s.recv(65536)
        except TimeoutError:
            continue
        except OSError:
            return "closed"
        if not data:
            return "closed"
        buf += data
        while len(buf) >= 9:
            n = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + n:
                break
            if buf[3] == 0x7:
                return "goaway"
            del buf[: 9 + n]
    return ""


def h2_zero_window(o: AttackOptions) -> dict:
    """R-h2-zero-window: one h2c connection with a stream window of 0 opens 100 streams for the
    large body, so nothing can be sent; the server must bound what it holds and end the stall."""

    def run():
        settings = struct.pack(">HI", 0x4, 0)  # SETTINGS_INITIAL_WINDOW_SIZE = 0
        s = _h2_open(o, settings)
        _h2_ack_settings(s, time.monotonic() + 1.0)
        for i in range(o.connections):
            s.sendall(h2_get(2 * i + 1, o.large_path))
        ok = served(o)
        end = _goaway_or_closed(s, o.write_timeout * 3 + 5)
        s.close()
        return {"attackers": 1, "cut": 1 if end else 0, "ended_by": end or "still open", "served": ok, "must_cut": True}

    return _verdict("R-h2-zero-window", f"h2c, window 0, {o.connections} streams for {o.large_path}", o, run)


def h2_window_update_flood(o: AttackOptions) -> dict:
    """R-h2-window-update-flood: WINDOW_UPDATE frames of 1 byte, as fast as the socket takes
    them, for 3 s: the server must stop it (GOAWAY or close) or stay cheap."""

    def run():
        s = _h2_open(o, b"")
        _h2_ack_settings(s, time.monotonic() + 1.0)
        frame = h2_frame(0x8, 0, 0, struct.pack(">I", 1)) * 512
        t0 = time.monotonic()
        sent = 0
        ended = ""
        before = measure(o.server_pid)
        while time.monotonic() - t0 < 3.0:
            try:
                s.sendall(frame)
                sent += 512
            except OSError:
                ended = "closed"
                break
        after = measure(o.server_pid)
        ended = ended or _goaway_or_closed(s, 1.0)
        s.close()
        wall = time.monotonic() - t0
        cpu = (after.cpu_s - before.cpu_s) / wall if before and after and wall else 0.0
        out = {"frames_sent": sent, "ended_by": ended or "still open", "flood_cpu_share": round(cpu, 3)}
        if not ended and cpu > 0.5:
            out["error"] = f"the flood kept the server {cpu:.0%} busy and was not stopped"
        return out

    return _verdict("R-h2-window-update-flood", "h2c, WINDOW_UPDATE(1) flood for 3 s", o, run)


def ws_slow_reader(o: AttackOptions) -> dict:
    """R-ws-slow-reader: WebSocket clients send echo messages and never read the echoes."""

    def run():
        socks = []
        n = max(1, o.connections // 5)
        frame = _ws_frame(b"x" * 65536)
        for _ in range(n):
            s = _connect(o, rcvbuf=4096)
            key = base64.b64encode(os.urandom(16))
            s.sendall(
                b"GET %s HTTP/1.1\r\nHost: probe\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (o.websocket_path.encode(), key)
            )
            head = s.recv(4096)
            if not head.startswith(b"HTTP/1.1 101"):
                raise OSError(f"no WebSocket upgrade: {head[:40]!r}")
            socks.append(s)
        # Push up to 4 MiB per client without reading; the server must stop reading (backpressure)
        # or close, never buffer the echoes without bound.
        pushed = 0
        for s in socks:
            s.setblocking(False)
            for _ in range(64):
                try:
                    s.send(frame)
                    pushed += len(frame)
                except (BlockingIOError, OSError):
                    break
        ok = served(o)
        cut, _, _ = _wait_cut(socks, o.write_timeout * 3 + 5, False, o)
        for s in socks:
            s.close()
        return {"attackers": n, "pushed_bytes": pushed, "cut": cut, "served": ok, "must_cut": False}

    return _verdict("R-ws-slow-reader", "WebSocket clients send and never read the echoes", o, run)


def _ws_frame(payload: bytes) -> bytes:
    """A masked binary frame (clients must mask, RFC 6455 §5.3)."""
    mask = os.urandom(4)
    n = len(payload)
    head = b"\x82" + (
        bytes([0x80 | n])
        if n < 126
        else b"\xfe" + struct.pack(">H", n)
        if n < 65536
        else b"\xff" + struct.pack(">Q", n)
    )
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


def run_all(o: AttackOptions) -> list[dict]:
    """Every attack the server speaks the protocol of, one after the other."""
    results = [slow_read_large(o), pipeline_no_read(o), stalled_upload(o)]
    if o.h2c:
        results += [h2_zero_window(o), h2_window_update_flood(o)]
    if o.websocket_path:
        results.append(ws_slow_reader(o))
    return results
