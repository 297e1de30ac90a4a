"""`./scripts/lab restart [--duration S]`: rolling restarts of the scenarios app under load,
the listener handed from each process to the next, and what the clients saw.

The lab binds the listening socket and hands it to every server process (descriptor 3,
`LISTEN_FDS=1`, `LISTEN_PID`: the socket-activation convention the engine reads). Each restart
starts the new process on the same socket, then sends the old one SIGTERM: it drains (in-flight
requests answered, idle connections closed, HTTP/2 connections sent GOAWAY) while the new one
already accepts from the same queue, so no connection is refused or lost in a backlog.

The clients follow these retry rules (docs/operations.md, "Rolling restart"):
* a request whose connection closed (or was reset) before any byte of its response was not
  processed: retry it on a new connection, whatever its method;
* an HTTP/2 stream above the GOAWAY's last stream id was not processed: retry it on a new
  connection; the streams at or below it are answered on the old one;
* a response with `Connection: close` ends that connection: the next request opens a new one;
* anything else (a timeout, a reset after part of a response, a 5xx) is a failure, not retried.

Every POST carries a unique id that the app appends to its ledger file (`POST /ledger`, the
file from `LEDGER`, shared by all the processes): an id there twice was executed twice. The
budgets: no failed request, no duplicated execution, no acknowledged POST missing from the
ledger, every HTTP/2 GOAWAY with NO_ERROR, every WebSocket closed with 1001 (Going Away),
every SSE stream ended cleanly (its last chunk) and every old process exited with status 0.

Every attempt (each retry too) also carries an id of its own in its target, and each process
writes its access log: exactly one line per answered attempt, with the status the client got,
across every hand-over (`restart_log`).

At each restart one more client (`HalfHead`) is halfway through a request head on the old
process: the drain must answer it 408 at once (the server stops waiting for the rest; the
client knows the request was not processed) and log exactly one line for it.
Writes results.json and report.md under lab/results/restart (or --out); exits 1 on a miss.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from . import config, procs, restart_log, restart_report, soak
from .restart_log import Attempts, tagged
from .soak_load import Clients
from .soak_proto import (
    REQUEST_TIMEOUT,
    H2Client,
    NotProcessed,
    ProtocolError,
    Target,
    connect,
    error_kind,
    exchange,
    get,
    request,
    ws_close_code,
    ws_frame,
    ws_handshake,
    ws_read,
)

DEFAULT_DURATION = 120.0
# A logical request gets this many attempts (the first and its retries).
MAX_ATTEMPTS = 4
# The handed-over server's shutdown deadline (SHUTDOWN_TIMEOUT, seconds).
SHUTDOWN_TIMEOUT = 5
# The RFC 6455 close code of a server going away.
WS_GOING_AWAY = 1001
TEXT = {"Content-Type": "text/plain"}


class RestartError(Exception):
    """The measurement could not run (no binary, a server that did not start or stop)."""


@dataclass
class Plan:
    """The load during the restarts and how often the server is restarted."""

    get_connections: int = 4
    get_rate: float = 200.0  # GET /json per second over the GET connections
    post_connections: int = 2
    post_rate: float = 50.0  # POST /ledger per second over the POST connections
    h2_sessions: int = 2
    h2_rate: float = 10.0  # batches (a GET and a POST stream) per second per session
    ws_sessions: int = 2
    sse_sessions: int = 2
    restart_every: float = 10.0  # seconds between restarts


CI_PLAN = Plan(get_rate=100.0, post_rate=20.0, h2_sessions=1, restart_every=5.0)


@dataclass
class Record:
    """What the clients saw over the whole measurement."""

    sent: Counter = field(default_factory=Counter)  # logical requests by kind
    ok: Counter = field(default_factory=Counter)
    failed: Counter = field(default_factory=Counter)  # by kind and error
    retried: Counter = field(default_factory=Counter)  # retries by reason
    acked: set[str] = field(default_factory=set)  # POST ids answered 201
    unacked: set[str] = field(default_factory=set)  # POST ids that failed
    # How each HTTP/2 connection ended: its GOAWAY code ("none": without one), then the end
    # of its read side ("eof", an error, or "open" when the client left first).
    h2_ends: Counter = field(default_factory=Counter)
    # Close codes of the server's close frames ("none": the connection ended without one,
    # "reset": it was reset).
    ws_closes: Counter = field(default_factory=Counter)
    sse_ends: Counter = field(default_factory=Counter)  # "clean" or "cut"
    attempts: Attempts = field(default_factory=Attempts)  # by id, for the access-log count
    # What each restart's half-head client got: "408", another status, or the error's kind.
    half_heads: Counter = field(default_factory=Counter)


class _Conn:
    """An HTTP/1.1 connection opened when first needed and dropped when done with."""

    def __init__(self, target: Target):
        self.target = target
        self.rw = None

    async def exchange(self, raw: bytes):
        """One attempt; a failed one drops the connection (the next opens a new one)."""
        if self.rw is None:
            self.rw = await connect(self.target)
        try:
            status, headers, body = await exchange(*self.rw, raw)
        except BaseException:
            self.drop()
            raise
        if headers.get("connection", "").lower() == "close":
            self.drop()
        return status, headers, body

    def drop(self) -> None:
        if self.rw is not None:
            self.rw[1].close()
            self.rw = None


class RestartLoad(Clients):
    """The clients during the restarts, following the retry rules of the module doc."""

    def __init__(self, target: Target, plan: Plan):
        super().__init__(target)
        self.plan = plan
        self.rec = Record()

    async def run(self) -> None:
        p = self.plan
        tasks = [
            self._h1(p.get_rate / p.get_connections, i, False) for i in range(p.get_connections)
        ]
        tasks += [
            self._h1(p.post_rate / p.post_connections, i, True) for i in range(p.post_connections)
        ]
        tasks += [self._h2() for _ in range(p.h2_sessions)]
        tasks += [self._ws() for _ in range(p.ws_sessions)]
        tasks += [self._sse() for _ in range(p.sse_sessions)]
        await asyncio.gather(*tasks)

    async def _logical(self, kind: str, attempt, check) -> bool:
        """One logical request: `attempt(id)` until it is answered or fails for a reason the
        rules do not retry, each attempt with an id of its own (for the access log);
        `check(status, body)` says whether the answer is right. True when it was answered
        right."""
        self.rec.sent[kind] += 1
        base = uuid.uuid4().hex
        for n in range(MAX_ATTEMPTS):
            rid = f"{base}-{n}"
            try:
                status, _, body = await attempt(rid)
            except NotProcessed as e:
                self.rec.attempts.unanswered.add(rid)
                self.rec.retried[f"{kind}:{e.why}"] += 1
                continue
            except Exception as e:
                self.rec.attempts.unanswered.add(rid)
                self.rec.failed[f"{kind}:{error_kind(e)}"] += 1
                return False
            self.rec.attempts.answered[rid] = status
            if check(status, body):
                self.rec.ok[kind] += 1
                return True
            self.rec.failed[f"{kind}:status {status}"] += 1
            return False
        self.rec.failed[f"{kind}:retries exhausted"] += 1
        return False

    async def _h1(self, rate: float, index: int, post: bool) -> None:
        """A keep-alive HTTP/1.1 client: GET /json, or POST /ledger with a unique id."""
        conn = _Conn(self.target)

        def send_post(rid: str, tag: str):
            return conn.exchange(request("POST", tagged("/ledger", tag), rid.encode(), TEXT))

        def send_get(tag: str):
            return conn.exchange(get(tagged("/json", tag)))

        try:
            async for _ in self._ticks(rate, index / 4):
                if post:
                    await self._post("h1_post", send_post)
                else:
                    await self._logical("h1_get", send_get, _hello)
        finally:
            conn.drop()

    async def _post(self, kind: str, send) -> None:
        """POST /ledger with a new unique id (`send(id, attempt id)` makes one attempt)."""
        rid = uuid.uuid4().hex
        ok = await self._logical(kind, lambda tag: send(rid, tag), lambda status, _b: status == 201)
        (self.rec.acked if ok else self.rec.unacked).add(rid)

    async def _h2(self) -> None:
        """An HTTP/2 (h2c) client: a GET /json and a POST /ledger stream at once per tick; a
        connection that got GOAWAY is replaced."""
        holder: list[H2Client] = []
        lock = asyncio.Lock()

        async def client() -> H2Client:
            async with lock:
                return await replace_if_done()

        async def replace_if_done() -> H2Client:
            if holder and (holder[0].goaway is not None or holder[0].closed):
                old = holder.pop()
                code = "none" if old.goaway is None else str(old.goaway[0])
                self.rec.h2_ends[f"goaway {code}, then {old.ended or 'open'}"] += 1
                await old.close()
            if not holder:
                c = H2Client(*await connect(self.target), scheme="http")
                await c.start()
                holder.append(c)
            return holder[0]

        async def get_json(tag: str):
            return await (await client()).request("GET", tagged("/json", tag))

        async def post(rid: str, tag: str):
            return await (await client()).request(
                "POST", tagged("/ledger", tag), rid.encode(), TEXT
            )

        try:
            async for _ in self._ticks(self.plan.h2_rate):
                await asyncio.gather(
                    self._logical("h2_get", get_json, _hello), self._post("h2_post", post)
                )
        finally:
            if holder:
                await holder[0].close()

    async def _opened(self, path: str, open_session) -> str:
        """Opens a long-lived session at `path` with an attempt id of its own
        (`open_session(tagged path)` returns once the server answered its head, with the
        status): the id, recorded as answered, or unanswered if opening failed."""
        rid = uuid.uuid4().hex
        try:
            status = await open_session(tagged(path, rid))
        except BaseException:
            self.rec.attempts.unanswered.add(rid)
            raise
        self.rec.attempts.answered[rid] = status
        return rid

    async def _ws(self) -> None:
        """A WebSocket echo session at a time; how the server closed each is recorded."""

        async def handshake(reader, writer, path: str) -> int:
            await ws_handshake(reader, writer, path)
            return 101

        async def session(reader, writer):
            await self._opened("/ws", lambda path: handshake(reader, writer, path))
            frames: asyncio.Queue = asyncio.Queue()
            reading = asyncio.create_task(self._ws_reader(reader, writer, frames))
            try:
                n = 0
                while not self.stop.is_set():
                    n += 1
                    text = f"restart {n}".encode()
                    writer.write(ws_frame(0x1, text))
                    frame = await asyncio.wait_for(frames.get(), REQUEST_TIMEOUT)
                    if frame is None:
                        return
                    if frame != (0x1, text):
                        raise ProtocolError("ws_mismatch", repr(frame[1][:40]))
                    try:
                        frame = await asyncio.wait_for(frames.get(), 0.5)
                    except TimeoutError:
                        continue
                    if frame is None:
                        return
                    raise ProtocolError("ws_unexpected", repr(frame[1][:40]))
                writer.write(ws_frame(0x8, (1000).to_bytes(2, "big")))
            finally:
                reading.cancel()

        await self._loop(session)

    async def _ws_reader(self, reader, writer, frames: asyncio.Queue) -> None:
        """Reads the server's frames as they come, as a browser does, pauses or not: a data
        frame goes to `frames`; the server's Close is answered at once and recorded (its code),
        as is a connection that ended without one; then None."""
        while True:
            try:
                opcode, payload = await ws_read(reader)
            except (asyncio.IncompleteReadError, ConnectionResetError) as e:
                self.rec.ws_closes["reset" if isinstance(e, OSError) else "none"] += 1
                break
            if opcode == 0x8:
                self.rec.ws_closes[str(ws_close_code(payload))] += 1
                writer.write(ws_frame(0x8, payload[:2]))
                break
            await frames.put((opcode, payload))
        await frames.put(None)

    async def _sse(self) -> None:
        """An SSE stream at a time: whether each ended with its last chunk or was cut."""

        async def open_stream(reader, writer, path: str) -> int:
            writer.write(get(path))
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
            if not head.startswith(b"HTTP/1.1 200"):
                raise ProtocolError("sse_status", head[:40].decode("latin-1"))
            return 200

        async def session(reader, writer):
            await self._opened("/events", lambda path: open_stream(reader, writer, path))
            tail = b""
            while not self.stop.is_set():
                read = asyncio.ensure_future(reader.read(4096))
                stop = asyncio.ensure_future(self.stop.wait())
                await asyncio.wait({read, stop}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                if not read.done():
                    read.cancel()
                    return
                chunk = read.result()
                if not chunk:
                    self.rec.sse_ends["clean" if tail.endswith(b"\r\n0\r\n\r\n") else "cut"] += 1
                    return
                tail = (tail + chunk)[-16:]

        await self._loop(session)


def _hello(status: int, body: bytes) -> bool:
    return status == 200 and b"Hello" in body


@dataclass
class Options:
    out_dir: Path
    duration: float = DEFAULT_DURATION
    skip_build: bool = False
    cargo_profile: str = "release"
    server_cpus: str | None = None
    workers: int = 2
    plan: Plan = field(default_factory=Plan)
    command: str = "./scripts/lab restart"
    progress: object = print


class HalfHead:
    """A client halfway through a request head when its server is told to stop. Its
    connection first has a whole request answered, so the process serving it is the one
    running before the next is started (the old one); then half of the next head goes out."""

    def __init__(self, port: int):
        self.rid = f"{uuid.uuid4().hex}-0"
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
        self.conn.request("GET", tagged("/json", self.rid))
        first = self.conn.getresponse()
        first.read()
        self.first_status = first.status
        self.peer = restart_log.by_peer(*self.conn.sock.getsockname()[:2])
        # Its id is no attempt's: a line with it would be of a request that was never whole.
        self.conn.sock.sendall(
            f"GET {tagged('/json', 'half')} HTTP/1.1\r\nHost: restart\r\n".encode()
        )

    def answer(self) -> str:
        """What the server answered the half head ("408", another status, or the error's
        kind), once it has."""
        try:
            resp = http.client.HTTPResponse(self.conn.sock)
            resp.begin()
            resp.read()
            return str(resp.status)
        except (OSError, http.client.HTTPException) as e:
            return f"no answer: {error_kind(e) if isinstance(e, OSError) else type(e).__name__}"
        finally:
            self.conn.close()


class Fleet:
    """The server processes on one handed-over listening socket, one at a time."""

    def __init__(self, exe: Path, sock: socket.socket, env: dict, opts: Options, access_logs: Path):
        self.exe, self.sock, self.env, self.opts = exe, sock, env, opts
        self.generation = 0
        self.current: procs.Server | None = None
        # Each process's access log (`access-N.log` in this folder), by process.
        self.access_logs = access_logs
        self.access_log_files: dict[str, Path] = {}

    def spawn(self) -> procs.Server:
        """A new server process on the socket, once it says it serves it."""
        self.generation += 1
        fd = self.sock.fileno()
        # bash puts the socket at descriptor 3 and exports its own pid, which `exec` keeps.
        cmd = [
            "bash",
            "-c",
            f'exec 3<&{fd}; LISTEN_FDS=1 LISTEN_PID=$$ exec "$0" "$@"',
            str(self.exe),
        ]
        log = self.opts.out_dir / "logs" / f"server-{self.generation}.log"
        name = f"server-{self.generation}"
        access = self.access_logs / f"access-{self.generation}.log"
        self.access_log_files[name] = access
        env = dict(self.env, ACCESS_LOG=str(access))
        server = procs.start_server(cmd, soak.ROOT, env, self.opts.server_cpus, log, pass_fds=(fd,))
        deadline = time.monotonic() + 30
        while "inherited listener" not in (log.read_text(errors="replace") if log.exists() else ""):
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise RestartError(f"server {self.generation} did not start:\n{server.log_tail()}")
            time.sleep(0.05)
        return server

    def restart(self) -> dict:
        """The next process up, then the current one drained with SIGTERM, a `HalfHead`
        client on it meanwhile."""
        old = self.current
        try:
            half = HalfHead(self.sock.getsockname()[1])
        except (OSError, http.client.HTTPException) as e:
            raise RestartError(f"the running server did not answer a whole request: {e}") from e
        new = self.spawn()
        self.current = new
        t0 = time.monotonic()
        old.proc.send_signal(signal.SIGTERM)
        # Read as the answer comes, as a client does: the old process lingers after the 408
        # until its client closes.
        answer = half.answer()
        try:
            status = old.proc.wait(SHUTDOWN_TIMEOUT + 10)
        except subprocess.TimeoutExpired:
            old.stop()
            status = "killed"
        return {
            "old_pid": old.pid,
            "new_pid": new.pid,
            "old_exit": status,
            "drain_seconds": round(time.monotonic() - t0, 3),
            "half_head": {
                "first": [half.rid, half.first_status],
                "peer": half.peer,
                "answer": answer,
            },
        }


async def _measure(fleet: Fleet, target: Target, opts: Options) -> tuple[list[dict], Record]:
    """The load for opts.duration, a restart every restart_every seconds."""
    load = RestartLoad(target, opts.plan)
    clients = asyncio.create_task(load.run())
    restarts = []
    start = time.monotonic()
    while time.monotonic() - start + opts.plan.restart_every <= opts.duration:
        await asyncio.sleep(opts.plan.restart_every)
        info = await asyncio.to_thread(fleet.restart)
        info["at"] = round(time.monotonic() - start, 2)
        half = info["half_head"]
        load.rec.attempts.answered[half["first"][0]] = half["first"][1]
        load.rec.half_heads[half["answer"]] += 1
        if half["answer"].isdigit():
            load.rec.attempts.answered[half["peer"]] = int(half["answer"])
        restarts.append(info)
        opts.progress(
            f"  {info['at']:6.1f} s  restart {len(restarts)}: {info}  {dict(load.rec.sent)}"
        )
    await asyncio.sleep(max(0.0, opts.duration - (time.monotonic() - start)))
    load.stop.set()
    try:
        await asyncio.wait_for(clients, 20)
    except TimeoutError:
        load.rec.failed["session:clients_did_not_stop"] += 1
    for kind, n in load.swap().errors.items():
        load.rec.failed[f"session:{kind}"] += n
    return restarts, load.rec


def ledger_counts(path: Path) -> Counter:
    """How often each id was executed, from the app's ledger file."""
    text = path.read_text() if path.exists() else ""
    return Counter(line for line in text.splitlines() if line)


def verdict(
    rec: Record, executed: Counter, restarts: list[dict], access: dict | None = None
) -> dict:
    """The budgets of the module doc, each a figure and whether it holds (`access`: the
    access-log count of `restart_log.count`, its checks among them)."""
    duplicated = sorted(i for i, n in executed.items() if n > 1)
    missing = sorted(rec.acked - set(executed))
    checks = {
        "failed_requests": sum(rec.failed.values()),
        "duplicated_executions": len(duplicated),
        "acknowledged_not_executed": len(missing),
        "h2_not_goaway_no_error": sum(
            n for end, n in rec.h2_ends.items() if not end.startswith("goaway 0,")
        ),
        "ws_not_going_away": sum(
            n for code, n in rec.ws_closes.items() if code != str(WS_GOING_AWAY)
        ),
        "sse_cut": rec.sse_ends.get("cut", 0),
        "old_process_not_exit_0": sum(1 for r in restarts if r["old_exit"] != 0),
        "half_head_not_408": sum(n for got, n in rec.half_heads.items() if got != "408"),
        **({f"access_log_{k}": n for k, n in access["checks"].items()} if access else {}),
    }
    failures = [f"{name}: {n}" for name, n in checks.items() if n]
    if not restarts:
        failures.append("no restart happened (duration shorter than restart_every)")
    return {
        "ok": not failures,
        "failures": failures,
        "checks": checks,
        "duplicated_ids": duplicated[:20],
        "missing_ids": missing[:20],
    }


def run(opts: Options) -> dict:
    """Builds (unless told not to), runs the restarts under load, writes results.json and
    report.md into opts.out_dir; returns the results."""
    commit = soak._git_commit()  # before the build: HEAD may move during the run
    load_before = soak.machine_load()
    if not opts.skip_build:
        opts.progress(
            f"building the scenarios app ({opts.cargo_profile}, features {soak.FEATURES})"
        )
        soak.build(opts.cargo_profile)
    exe = soak.binary(opts.cargo_profile)
    if not exe.exists():
        raise RestartError(f"{exe} is missing (run without --skip-build)")
    opts.out_dir.mkdir(parents=True, exist_ok=True)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
    sock.set_inheritable(True)
    port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="peregrine-restart-") as tmp:
        ledger = Path(tmp) / "ledger"
        env = dict(
            os.environ,
            WORKERS=str(opts.workers),
            LEDGER=str(ledger),
            SHUTDOWN_TIMEOUT=str(SHUTDOWN_TIMEOUT),
        )
        env.pop("ADDR", None)
        fleet = Fleet(exe, sock, env, opts, Path(tmp))
        try:
            fleet.current = fleet.spawn()
            opts.progress(
                f"restarting {exe.name} every {opts.plan.restart_every:.0f} s for "
                f"{opts.duration:.0f} s (port {port})"
            )
            restarts, rec = asyncio.run(_measure(fleet, Target("127.0.0.1", port), opts))
        finally:
            if fleet.current is not None:
                fleet.current.stop()
            sock.close()
        executed = ledger_counts(ledger)
        access = restart_log.count(rec.attempts, fleet.access_log_files)
    logs = "".join(
        p.read_text(errors="replace") for p in (opts.out_dir / "logs").glob("server-*.log")
    )
    budgets = verdict(rec, executed, restarts, access)
    if logs.count("panicked"):
        budgets["failures"].append(f"the server logs hold {logs.count('panicked')} panic(s)")
        budgets["ok"] = False
    result = {
        "schema": 1,
        "profile": "restart",
        "command": opts.command,
        "started": started,
        "git_commit": commit,
        "duration_seconds": opts.duration,
        "plan": asdict(opts.plan),
        "server": {
            "binary": str(exe.relative_to(soak.ROOT)),
            "cargo_profile": opts.cargo_profile,
            "features": soak.FEATURES,
            "workers": opts.workers,
            "shutdown_timeout_seconds": SHUTDOWN_TIMEOUT,
        },
        "requests": {
            "sent": dict(rec.sent),
            "ok": dict(rec.ok),
            "failed": dict(rec.failed),
            "retried": dict(rec.retried),
            "posts_acknowledged": len(rec.acked),
            "posts_failed": len(rec.unacked),
            "executions_in_ledger": sum(executed.values()),
            "distinct_ids_in_ledger": len(executed),
        },
        "h2_ends": dict(rec.h2_ends),
        "ws_close_codes": dict(rec.ws_closes),
        "sse_ends": dict(rec.sse_ends),
        "half_heads": dict(rec.half_heads),
        "access_log": access,
        "restarts": restarts,
        "budgets": budgets,
        "machine": {"before": load_before, "after": soak.machine_load()},
    }
    (opts.out_dir / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (opts.out_dir / "report.md").write_text(restart_report.markdown(result))
    return result


def main(args, command: str) -> int:
    """`./scripts/lab restart`, from the lab's parsed arguments."""
    procs.install_handlers()
    opts = Options(
        out_dir=args.out or (config.LAB_DIR / "results" / "restart"),
        duration=args.duration or DEFAULT_DURATION,
        skip_build=args.skip_build,
        server_cpus=args.server_cpus,
        command=command,
    )
    try:
        res = run(opts)
    except (RestartError, soak.SoakError, procs.StartError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        procs.kill_all()
        print("\ninterrupted: the servers are stopped", file=sys.stderr)
        return 130
    r = res["requests"]
    print(f"results: {opts.out_dir / 'results.json'}, report: {opts.out_dir / 'report.md'}")
    print(
        f"{len(res['restarts'])} restarts; sent {sum(r['sent'].values())}, failed "
        f"{sum(r['failed'].values())}, duplicated "
        f"{res['budgets']['checks']['duplicated_executions']}, "
        f"retried {sum(r['retried'].values())}; HTTP/2 ends {res['h2_ends']}, WebSocket closes "
        f"{res['ws_close_codes']}, SSE ends {res['sse_ends']}, half heads at SIGTERM "
        f"{res['half_heads']}; access log: "
        f"{res['access_log']['lines']} lines for {res['access_log']['attempts_answered']} "
        f"answered attempts, {res['access_log']['checks']}"
    )
    if not res["budgets"]["ok"]:
        for f in res["budgets"]["failures"]:
            print(f"BUDGET MISSED: {f}", file=sys.stderr)
        return 1
    print("every budget met")
    return 0
