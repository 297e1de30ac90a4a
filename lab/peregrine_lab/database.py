"""A real PostgreSQL for the database scenarios: Debian's `postgresql` server, started
by the lab in its own data directory on 127.0.0.1 and a free port, loaded with TechEmpower's
schema and data, and always stopped: at the end of the `with` block, on an exception, on Ctrl-C /
SIGTERM (the lab's handlers turn them into KeyboardInterrupt, which unwinds through `__exit__`),
and at interpreter exit (atexit).

PostgreSQL refuses to run as root: when the lab runs as root, initdb and postgres run as the
`postgres` user (created by Debian's package) and the data directory is made theirs.

    with Database(run_dir) as db:
        print(db.url)                      # postgres://benchmarkdbuser:...@127.0.0.1:PORT/hello_world
        db.query("SELECT count(*) FROM world")
        db.cpu_seconds()                   # utime + stime of every PostgreSQL process
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from . import config, metrics

DB_NAME = "hello_world"
DB_USER = "benchmarkdbuser"
DB_PASSWORD = "benchmarkdbpass"
WORLD_ROWS = 10_000
ADDITIONAL_FORTUNE = "Additional fortune added at request time."

# TechEmpower's 12 fortunes (toolset/databases/postgres/create-postgres.sql), ids 1..12.
FORTUNES: list[tuple[int, str]] = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. — Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "フレームワークのベンチマーク"),
]

# Settings of a benchmark database (TechEmpower's postgresql.conf is in the same spirit): no
# commit waits for the disk, no logging per statement; everything else is Debian's default.
SERVER_SETTINGS = {
    "listen_addresses": "127.0.0.1",
    "unix_socket_directories": "",  # TCP on loopback only: nothing outside the data dir
    "max_connections": "300",
    "shared_buffers": "128MB",
    "synchronous_commit": "off",
    "log_min_messages": "warning",
    "log_checkpoints": "off",
    "jit": "off",  # TechEmpower's queries are tiny; JIT compilation only adds CPU
}


class DatabaseError(Exception):
    """PostgreSQL could not be found, started or loaded."""


def bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/N/bin holding `postgres` (Debian's layout), or the folder of
    a `postgres` on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/postgres"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else None


def available() -> bool:
    b = bin_dir()
    return b is not None and all((b / t).exists() for t in ("initdb", "postgres", "psql"))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def schema_sql(seed: int | None = None) -> str:
    """TechEmpower's schema and data. `world.randomnumber` values are drawn in the database
    (random() * 10000 + 1, i.e. 1..10000); lower-case unquoted names, as every driver queries."""
    fortunes = ",\n".join(f"({i}, {_sql_str(m)})" for i, m in FORTUNES)
    setseed = f"SELECT setseed({seed});\n" if seed is not None else ""
    return f"""
CREATE TABLE world (
  id integer NOT NULL,
  randomnumber integer NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
);
{setseed}INSERT INTO world (id, randomnumber)
  SELECT x, least(floor(random() * {WORLD_ROWS} + 1)::integer, {WORLD_ROWS})
  FROM generate_series(1, {WORLD_ROWS}) AS x;
CREATE TABLE fortune (
  id integer NOT NULL,
  message varchar(2048) NOT NULL,
  PRIMARY KEY (id)
);
INSERT INTO fortune (id, message) VALUES
{fortunes};
GRANT SELECT, UPDATE ON world TO {DB_USER};
GRANT SELECT ON fortune TO {DB_USER};
VACUUM ANALYZE world;
VACUUM ANALYZE fortune;
"""


_running: list[Database] = []


def _stop_all() -> None:
    for db in list(_running):
        db.stop()


atexit.register(_stop_all)


class Database:
    """One PostgreSQL server with its own data directory (a fresh `peregrine-lab-pg-*` folder in
    the temporary directory, removed when it stops: the `postgres` user must be able to reach it,
    which a lab folder under a private home or a test's 0700 temporary folder does not allow);
    its log goes to `log_path` (default `run_dir/postgres.log`). `cpus`, a taskset list, pins
    every PostgreSQL process."""

    def __init__(
        self,
        run_dir: Path,
        *,
        port: int | None = None,
        cpus: str | None = None,
        log_path: Path | None = None,
        seed: int | None = None,
    ):
        self.run_dir = Path(run_dir)
        self._tmp: Path | None = None
        self.data_dir = Path("/nonexistent/peregrine-lab-pg")
        self.port = port
        self.cpus = cpus
        self.log_path = log_path or (self.run_dir / "postgres.log")
        self.seed = seed
        self.proc: subprocess.Popen | None = None
        self.bin = bin_dir()
        self.version: str | None = None
        self._as_user: str | None = None

    @classmethod
    def client(cls, url: str) -> Database:
        """A handle on a database started elsewhere (from its DATABASE_URL): queries only."""
        db = cls(Path(tempfile.gettempdir()) / "peregrine-lab-db-client")
        db.port = urlsplit(url).port
        return db

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Database:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def url(self) -> str:
        """The connection URL every server gets as DATABASE_URL."""
        return f"postgres://{DB_USER}:{DB_PASSWORD}@{self.host}:{self.port}/{DB_NAME}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _user_kwargs(self) -> dict:
        if self._as_user is None:
            return {}
        pw = pwd.getpwnam(self._as_user)
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PGTZ": "UTC", "PGCONNECT_TIMEOUT": "3"}
        )
        if self._as_user is not None:
            env["HOME"] = str(self.data_dir)
            env["USER"] = env["LOGNAME"] = self._as_user
        return env

    def start(self, timeout: float = 60.0) -> None:
        if not available():
            raise DatabaseError(
                "PostgreSQL not found (no /usr/lib/postgresql/*/bin/postgres): "
                "scripts/setup installs Debian's postgresql package"
            )
        if self.alive():
            return
        from . import procs

        # SIGINT/SIGTERM/SIGHUP become KeyboardInterrupt (unwinding through __exit__).
        procs.install_handlers()
        self._as_user = "postgres" if os.geteuid() == 0 else None
        if self._as_user is not None:
            try:
                pwd.getpwnam(self._as_user)
            except KeyError as e:
                raise DatabaseError(
                    "running as root, and there is no `postgres` user to run PostgreSQL as "
                    "(Debian's postgresql package creates it)"
                ) from e
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._tmp = Path(tempfile.mkdtemp(prefix="peregrine-lab-pg-"))
        self._tmp.chmod(0o711)  # the postgres user may pass, not list
        self.data_dir = self._tmp / "data"
        self.data_dir.mkdir(mode=0o700)
        if self._as_user is not None:
            pw = pwd.getpwnam(self._as_user)
            os.chown(self.data_dir, pw.pw_uid, pw.pw_gid)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        _running.append(self)
        try:
            self._initdb()
            self._launch(timeout)
            self._load()
        except BaseException:
            self.stop()
            raise

    def _run(self, cmd: list[str], what: str, timeout: float = 120.0, stdin: str | None = None):
        try:
            r = subprocess.run(
                cmd,
                input=stdin,
                capture_output=True,
                text=True,
                env=self._env(),
                cwd=self.data_dir if self.data_dir.exists() else None,
                timeout=timeout,
                **self._user_kwargs(),
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise DatabaseError(f"{what}: {e}") from e
        if r.returncode != 0:
            raise DatabaseError(f"{what} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
        return r.stdout

    def _initdb(self) -> None:
        self._run(
            [
                str(self.bin / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                "postgres",
                "--auth=trust",  # loopback only, a throw-away cluster
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            "initdb",
        )

    def _launch(self, timeout: float) -> None:
        if self.port is None:
            self.port = free_port(self.host)
        cmd = [str(self.bin / "postgres"), "-D", str(self.data_dir), "-p", str(self.port)]
        for k, v in SERVER_SETTINGS.items():
            cmd += ["-c", f"{k}={v}"]
        if self.cpus:
            cmd = ["taskset", "-c", self.cpus] + cmd
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                cmd,
                cwd=self.data_dir,
                env=self._env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: killpg reaches every backend
                **self._user_kwargs(),
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise DatabaseError(
                    f"postgres exited with status {self.proc.returncode} at start; end of "
                    f"{self.log_path}:\n{self._log_tail()}"
                )
            try:
                out = self.query(
                    "SELECT current_setting('server_version')", db="postgres", timeout=5.0
                )
                self.version = out.strip()
                return
            except DatabaseError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def _log_tail(self, n: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def _load(self) -> None:
        self.query(f"CREATE USER {DB_USER} PASSWORD {_sql_str(DB_PASSWORD)}", db="postgres")
        self.query(f"CREATE DATABASE {DB_NAME} OWNER {DB_USER}", db="postgres")
        self.query(schema_sql(self.seed))

    def query(self, sql: str, *, db: str = DB_NAME, timeout: float = 60.0) -> str:
        """Run SQL with psql as the superuser; rows come back unaligned, `|`-separated."""
        return self._run(
            [
                str(self.bin / "psql"),
                "-X",
                "-q",
                "-v",
                "ON_ERROR_STOP=1",
                "-A",
                "-t",
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                db,
            ],
            "psql",
            timeout=timeout,
            stdin=sql,
        )

    def rows(self, sql: str) -> list[list[str]]:
        return [line.split("|") for line in self.query(sql).splitlines() if line]

    def worlds(self) -> dict[int, int]:
        """Every World row: id → randomNumber."""
        return {int(i): int(r) for i, r in self.rows("SELECT id, randomnumber FROM world")}

    def pids(self) -> list[int]:
        """The postmaster and every process it started (backends, background workers)."""
        return metrics.process_tree(self.proc.pid) if self.alive() else []

    def cpu_seconds(self) -> float:
        """CPU time (user + system) PostgreSQL has used since it started: utime + stime of every
        live process, plus the postmaster's cutime + cstime, which holds the time of the
        backends it has reaped (a connection that closed keeps counting), so the figure only
        grows."""
        if not self.alive():
            return 0.0
        live = metrics.cpu_seconds(self.pids())
        f = metrics._stat_fields(self.proc.pid)
        reaped = (int(f[13]) + int(f[14])) / metrics.CLK_TCK if f else 0.0  # fields 16, 17
        return live + reaped

    def stop(self, grace: float = 10.0) -> None:
        """Fast shutdown (SIGINT: clients disconnected, no waiting for them), then immediate
        (SIGQUIT), then SIGKILL to the whole process group; the data directory is removed."""
        proc, self.proc = self.proc, None
        if proc is not None:
            for sig, wait in ((signal.SIGINT, grace), (signal.SIGQUIT, 5.0)):
                if proc.poll() is not None:
                    break
                try:
                    os.kill(proc.pid, sig)
                    proc.wait(timeout=wait)
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if any
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                pass
        if self in _running:
            _running.remove(self)
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


# ---------------------------------------------------------------------- the lab run's database
#
# The runner's hooks (runner.py) are one-liners into these functions, so the measuring loop stays
# the same with or without a database.

POOL_TOTAL = 8
"""Database connections per server, in total (DB_POOL): each server splits it over its workers
(Peregrine and actix: DB_POOL / WORKERS per worker; a Node cluster or Bun: per process; Go, axum:
one pool of DB_POOL), so every server holds the same number of connections."""

_active: Database | None = None


def start_for_run(out_dir: Path, cpus: str | None) -> Database:
    """Start the run's database (its data under `out_dir`, its log in `out_dir/logs`)."""
    global _active
    db = Database(out_dir, cpus=cpus, log_path=Path(out_dir) / "logs" / "postgres.log")
    db.start()
    _active = db
    return db


def active() -> Database | None:
    return _active if _active is not None and _active.alive() else None


def stop_active() -> None:
    global _active
    db, _active = _active, None
    if db is not None:
        db.stop()


def server_env() -> dict[str, str]:
    """What a server needs to reach the run's database; {} without one (plaintext profiles)."""
    db = active()
    if db is None:
        return {}
    return {"DATABASE_URL": db.url, "DB_POOL": str(POOL_TOTAL)}


def cpu_now() -> float | None:
    db = active()
    return db.cpu_seconds() if db is not None else None


def run_figures(cpu_before: float | None, requests: int) -> dict:
    """The database's CPU over one timed run, per response: {} without a database."""
    if cpu_before is None:
        return {}
    used = (cpu_now() or 0.0) - cpu_before
    return {
        "db_cpu_s": used,
        "db_cpu_us_per_req": used * 1e6 / requests if requests else None,
    }


def summary(db: Database) -> dict:
    return {
        "version": db.version,
        "cpus": db.cpus,
        "pool_total": POOL_TOTAL,
        "settings": dict(SERVER_SETTINGS),
        "world_rows": WORLD_ROWS,
        "fortunes": len(FORTUNES),
    }


def _plain_scenarios(prof) -> set[str]:
    """The scenarios of contract/scenarios.json a database profile names beside the database
    ones (the tfb profile's plaintext and json); none for the db profile."""
    if not isinstance(prof.scenarios, (list, tuple)):
        return set()
    from .peers import load_contract

    return set(prof.scenarios) - set(load_contract(config.DB_SCENARIOS_JSON).names())


def profile_contract(prof):
    """The contract a profile measures: contract/scenarios.json, contract/db.json for a database
    profile, or both in one when a database profile names scenarios of each (tfb)."""
    from .peers import Contract, load_contract

    if not prof.database:
        return load_contract(config.SCENARIOS_JSON)
    db = load_contract(config.DB_SCENARIOS_JSON)
    if not _plain_scenarios(prof):
        return db
    plain = load_contract(config.SCENARIOS_JSON)
    return Contract(plain.scenarios + db.scenarios, plain.required_headers)


def db_peers(peers: list, prof=None) -> list:
    """The peers of a database profile, with the scenarios they serve of it: their
    `db_scenarios` (peers.toml), and those of their `scenarios` the profile names too (tfb's
    plaintext and json). A peer with none is left out."""
    from dataclasses import replace

    plain = _plain_scenarios(prof) if prof is not None else set()
    chosen = [
        (p, [s for s in p.scenarios if s in plain] + list(p.extra.get("db_scenarios", ())))
        for p in peers
    ]
    return [replace(p, scenarios=scenarios) for p, scenarios in chosen if scenarios]


class db_hooks:  # noqa: N801 - used as a module by runner.py (`from .database import db_hooks`)
    """The runner's hooks in one name, so runner.py imports one thing for the db profile."""

    start_for_run = staticmethod(start_for_run)
    stop_active = staticmethod(stop_active)
    active = staticmethod(active)
    server_env = staticmethod(server_env)
    cpu_now = staticmethod(cpu_now)
    run_figures = staticmethod(run_figures)
    summary = staticmethod(summary)
    db_peers = staticmethod(db_peers)
    profile_contract = staticmethod(profile_contract)

    @staticmethod
    def parity_check(host, port, scenario, required_headers, db):
        from . import db_parity

        return db_parity.check(host, port, scenario, required_headers, db)
