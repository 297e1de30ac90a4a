"""Paths, measurement profiles and the CPU split.

A profile says which servers and scenarios are measured and which cells: a cell is one
(concurrency, pipelining depth) pair for one (server, scenario). Profiles are data, so the report
can state exactly what a run measured.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = LAB_DIR.parent
CONTRACT_DIR = LAB_DIR / "contract"
PEERS_DIR = LAB_DIR / "peers"
PEERS_TOML = PEERS_DIR / "peers.toml"
GO_TOOLCHAIN = "go1.27.4"
"""The Go release the Go peers are built with (peers.toml sets GOTOOLCHAIN to it for their build
and version commands; the go command fetches it as the golang.org/toolchain module): the current
release, whatever Go the machine has."""
SCENARIOS_JSON = CONTRACT_DIR / "scenarios.json"
DB_SCENARIOS_JSON = CONTRACT_DIR / "db.json"  # the database scenarios
PROBE_SCRIPT = REPO_DIR / "probe" / "probe.py"
WRK_SCRIPT = Path(__file__).resolve().parent / "wrk_report.lua"

MAIN_SCENARIOS = "main"
"""Marker for "the scenarios the contract flags `main: true`"."""


@dataclass(frozen=True)
class Lane:
    """One group of cells measured the same way, for a chosen set of servers.

    `mode`: "keep-alive" (closed loop, the default), "close" (a new connection per request:
    `Connection: close` on every request, so accept + request + close are counted), or "open"
    (open loop: oha at each fixed rate of `rates`, up to the server's knee). `runs`/`duration`
    default to the profile's. A cell measured by an earlier lane is not measured again."""

    name: str
    title: str
    scenarios: tuple[str, ...]
    cells: tuple[tuple[int, int], ...] = ((50, 0),)
    servers: tuple[str, ...] | None = None
    runs: int | None = None
    duration: float | None = None
    mode: str = "keep-alive"
    rates: tuple[int, ...] = ()


@dataclass(frozen=True)
class ScalingLane:
    """The scaling lane (scaling.py): each server measured at every worker count of `workers`
    on fresh processes, in interleaved rounds, so the throughput ratio between worker counts
    has a confidence interval. A worker count above the run's server CPUs shares the load
    generator's CPUs (on 2 CPUs, WORKERS=2 runs on CPUs 0-1 with the load generator)."""

    servers: tuple[str, ...]
    scenario: str = "plaintext"
    cells: tuple[tuple[int, int], ...] = ((50, 0),)
    workers: tuple[int, ...] = (1, 2)
    runs: int = 5
    duration: float = 3.0


@dataclass(frozen=True)
class Profile:
    """What one run measures.

    `cells` are (concurrency, pipelining depth) pairs; depth 0 means one request per write.
    `sweep_scenarios`, when set, names the scenarios measured at every shape of `cells`; the
    others are measured at `base_cells` only. That keeps quick inside its 10-minute budget and
    standard under an hour while the headline scenarios still get the full sweep.
    """

    name: str
    description: str
    servers: tuple[str, ...] | None = None
    scenarios: tuple[str, ...] | str | None = None
    cells: tuple[tuple[int, int], ...] = ((50, 0),)
    sweep_scenarios: tuple[str, ...] | None = None
    base_cells: tuple[tuple[int, int], ...] = ((50, 0),)
    runs: int = 3
    duration: float = 5.0
    warmup: float = 2.0
    idle_connections: int = 5000
    probe: tuple[str, ...] | None = ()
    """Arguments for probe/probe.py (() = its full run), or None to skip the probe."""
    timeout: float = 5.0
    lanes: tuple[Lane, ...] = ()
    """When set, the cells to measure (instead of `cells`/`sweep_scenarios`/`base_cells`)."""
    skip_servers: tuple[str, ...] = ()
    """Servers left out unless named with --servers (variants measured by bigger profiles)."""
    database: bool = False
    """Start PostgreSQL, measure the scenarios of contract/db.json (database.py)."""
    round_warmup: float = 0.0
    """Warm-up before a cell's run in the rounds after the first (the servers stay up between
    rounds, so their JIT and pools are warm; this only refills caches)."""
    scaling: ScalingLane | None = None
    """The scaling lane (scaling.py): 1 and 2 workers, measured after the other cells."""

    def to_json(self) -> dict:
        # Through JSON so tuples become lists, as they are when read back from results.json.
        return json.loads(json.dumps(asdict(self)))


FAST_SERVERS = (
    "peregrine-hello",
    "peregrine",
    "floor",
    "hyper",
    "hyper-percore",
    "hyper-flush",
    "axum-percore",
    "axum-flush",
    "actix",
    "actix-tfb",
    "go-fasthttp",
    "nginx",
    "h2o",
)
"""The servers within ~3x of the floor on plaintext here."""
PIPELINED_SERVERS = (
    "peregrine-hello",
    "peregrine",
    "floor",
    "hyper-percore",
    "hyper-flush",
    "axum-flush",
    "actix",
    "actix-tfb",
    "go-fasthttp",
    "nginx",
)
"""The pipelined lane's set: the fastest pipelining servers of the lab's earlier runs, with hyper
and axum in the setup their community benchmarks pipeline with (pipeline_flush on)."""
SWEEP_SERVERS = ("peregrine-hello", "peregrine", "floor", "hyper-percore", "nginx")
"""The breadth lanes' set: the engine, the framework, the floor, the fastest Rust peer (in its
benchmark shape) and the fastest C server."""
SCALING_SERVERS = (
    "peregrine-hello",
    "peregrine",
    "floor",
    "hyper-percore",
    "axum-percore",
    "actix",
    "go-fasthttp",
    "go-nethttp",
    "nginx",
    "h2o",
    "node-http",
)
"""The scaling lane's set: every kind of worker model (thread per core with SO_REUSEPORT, one
acceptor handing off, Go's scheduler, processes) among the servers with a worker setting."""
SCALING_LANE = ScalingLane(servers=SCALING_SERVERS)
ENGINE_SERVERS = ("peregrine-hello", "peregrine-hello-before", "floor", "hyper-flush")
"""The engine profile's set: the engine now and at --before-ref (before.py), the
floor, and hyper in its fair per-core shape (one current-thread runtime and SO_REUSEPORT
listener per worker, as Peregrine) with `pipeline_flush(true)`, as TechEmpower runs it."""
ENGINE_LANES = ((1, 0), (50, 0), (64, 16), (64, 256))
"""The engine's four lanes (crates/peregrine-server/bench/interleaved.sh's c1 c50 p16
p256): one client, 50 without pipelining, 64 connections x 16 and x 256 pipelined."""
TFB_LEADERS = ("may-minihttp", "xitca-web", "ntex")
"""TechEmpower's fastest Rust entries, set up as their entries are (lab/peers/rust-tfb): a cargo
project of their own that only the `tfb` profile (or a run naming them) builds, so every other
profile skips them."""
TFB_ONLY_SERVERS = TFB_LEADERS + ("peregrine-mimalloc",)
"""The servers only the `tfb` profile (or a run naming them) measures: the leaders, and Peregrine's
app on mimalloc as they ship (every other profile keeps the system allocator's build)."""
TFB_SERVERS = (
    "peregrine",
    "peregrine-mimalloc",
    *TFB_LEADERS,
    "hyper-flush",
    "axum-flush",
    "actix-tfb",
)
"""The `tfb` profile's set: Peregrine's framework, the leaders, and hyper, axum and actix-web in
their TechEmpower setups."""
TFB_LANES = (
    Lane(
        "plaintext",
        "plaintext, 256 connections x 16 pipelined and without",
        ("plaintext",),
        ((256, 16), (256, 0)),
    ),
    Lane("json", "json, 256 connections", ("json",), ((256, 0),)),
    Lane(
        "database",
        "db, queries (20), fortunes, updates (20), 256 connections",
        ("db", "queries", "fortunes", "updates"),
        ((256, 0),),
    ),
)
"""TechEmpower's six tests as it runs them: plaintext pipelined 16 deep (and, as the issue asks,
without pipelining), the others one request per write; queries and updates at 20 (the contract's
paths)."""
OPEN_RATES = (5_000, 10_000, 20_000, 40_000, 60_000, 80_000, 100_000, 125_000, 150_000)
"""Offered loads of the open-loop sweep (requests per second); a server's sweep stops after the
first rate it does not sustain (its knee)."""


def _product(concurrency, pipeline):
    return tuple((c, p) for p in pipeline for c in concurrency)


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in [
        Profile(
            name="quick",
            description=(
                "every server but the standard profile's variants (hyper-percore, axum-percore, "
                "actix-tfb, express-tfb, bun-fastify) and the Node frameworks "
                "Express, Hono and Koa (Fastify stands for them; standard measures all) on the "
                "main scenarios at 50 connections without pipelining, plus plaintext with 16 "
                "pipelined requests per connection; 2 short runs per cell; idle memory with 1000 "
                "connections; the probe's quick corpus and sweep without its robustness "
                "scenarios (under 10 minutes of measuring on 2 busy CPUs: 3 runs and those 3 "
                "servers took about 11)"
            ),
            scenarios=MAIN_SCENARIOS,
            cells=((50, 0), (50, 16)),
            sweep_scenarios=("plaintext",),
            runs=2,
            duration=1.0,
            warmup=1.0,
            idle_connections=1000,
            # The probe's robustness scenarios (slow clients, timeouts) take ~15 s per server;
            # quick keeps the corpus and the reduced sweep, which fit the 10-minute budget.
            probe=("--quick", "--no-robustness"),
            # hyper and axum with pipeline_flush(true) stay: the headline's pipelined column shows
            # them beside their defaults (hyper-flush is hyper-percore with flush on, so
            # hyper-percore goes). The other variants and the Node frameworks on node:http
            # but Fastify are the standard profile's, with 2 runs instead of 3: measured at
            # 10.5 min with 3 runs and them on a busy 2-CPU machine, over the 10-minute budget.
            skip_servers=(
                "hyper-percore",
                "axum-percore",
                "actix-tfb",
                "express-tfb",
                "bun-fastify",
                "express",
                "hono",
                "koa",
            )
            + TFB_ONLY_SERVERS,
        ),
        Profile(
            name="standard",
            description=(
                "the headline cells (plaintext at 50 connections, every server; plaintext with 16 "
                "pipelined, the servers that pipeline fast; Peregrine's json and param) as 10 "
                "interleaved runs of 5 s with 95% intervals; json and param at 50 "
                "connections for every server (3 runs of 2 s); the seeds' lanes c=1 and "
                "Kourier's 512 x 256 pipelined (3 runs of 3 s); a concurrency sweep to 10,000 "
                "connections, a connection per request, and an open-loop rate sweep to each "
                "server's knee (oha), for the fastest servers, every other server at the sweep's "
                "first rate; idle memory with 1000 connections; "
                "the probe's quick set without robustness; the scaling lane (plaintext at 50 "
                "connections with WORKERS=1 and WORKERS=2, the load generator sharing both CPUs "
                "at 2 workers; 5 interleaved runs of 3 s) (about 63 minutes on 2 CPUs by the "
                "runner's estimate)"
            ),
            scaling=SCALING_LANE,
            scenarios=None,
            cells=((50, 0),),
            # Measured by the `tfb` profile only: their own cargo project is not built here.
            skip_servers=TFB_ONLY_SERVERS,
            runs=10,
            duration=5.0,
            warmup=1.0,
            idle_connections=1000,
            probe=("--quick", "--no-robustness"),
            lanes=(
                Lane("headline", "every server, 10 x 5 s", ("plaintext",), ((50, 0),)),
                Lane(
                    "pipelined",
                    "16 pipelined, 10 x 5 s",
                    ("plaintext",),
                    ((50, 16),),
                    servers=PIPELINED_SERVERS,
                ),
                Lane(
                    "framework",
                    "Peregrine's framework targets, 10 x 5 s",
                    ("json", "param"),
                    ((50, 0),),
                    servers=("peregrine",),
                ),
                Lane(
                    "scenarios",
                    "json and param, every server, 3 x 2 s",
                    ("json", "param"),
                    ((50, 0),),
                    runs=3,
                    duration=2.0,
                ),
                Lane(
                    "seeds",
                    "the seeds' lanes: c=1, Kourier's 512 x 256; 3 x 3 s",
                    ("plaintext",),
                    # No c=1 x 256: one connection then carries over a million responses a
                    # second, and wrk 4.1's latency correction divides the run by the responses
                    # per connection, gets an interval of 0 µs and never returns.
                    ((1, 0), (512, 256)),
                    servers=SWEEP_SERVERS + ("hyper-flush", "axum-flush"),
                    runs=3,
                    duration=3.0,
                ),
                Lane(
                    "concurrency",
                    "concurrency sweep, 3 x 3 s",
                    ("plaintext",),
                    ((10, 0), (200, 0), (1000, 0), (10000, 0)),
                    servers=SWEEP_SERVERS,
                    runs=3,
                    duration=3.0,
                ),
                Lane(
                    "close",
                    "a new connection per request (Connection: close), 3 x 3 s",
                    ("plaintext",),
                    ((50, 0),),
                    servers=tuple(x for x in SWEEP_SERVERS if x != "floor")
                    + ("go-fasthttp", "node-http", "h2o"),
                    runs=3,
                    duration=3.0,
                    mode="close",
                ),
                Lane(
                    "open",
                    "open loop (oha -q RATE --latency-correction), 2 s per rate up to the knee",
                    ("plaintext",),
                    ((50, 0),),
                    servers=SWEEP_SERVERS + ("go-fasthttp", "node-http"),
                    runs=1,
                    duration=2.0,
                    mode="open",
                    rates=OPEN_RATES,
                ),
                # Every other server at the sweep's first rate, so every server has a CPU per
                # request at one equal offered load (closed-loop cells compare servers at
                # whatever busy share wrk drives each to).
                Lane(
                    "fixed-rate",
                    f"every server at {OPEN_RATES[0]:,} req/s offered (oha open loop), 2 s",
                    ("plaintext",),
                    ((50, 0),),
                    runs=1,
                    duration=2.0,
                    mode="open",
                    rates=OPEN_RATES[:1],
                ),
            ),
        ),
        Profile(
            name="scaling",
            description=(
                "the scaling lane alone: plaintext at 50 connections with WORKERS=1 (server on "
                "one CPU, the load generator on the other) and WORKERS=2 (server and load "
                "generator SHARING both CPUs), for every worker model; 5 interleaved runs of 3 s "
                "per worker count, the 2-worker/1-worker ratio with its 95% interval "
                "and what the 1-worker figures predict for it (about 8 minutes on 2 CPUs)"
            ),
            servers=SCALING_SERVERS,
            scenarios=("plaintext",),
            cells=(),
            runs=5,
            duration=3.0,
            warmup=1.0,
            idle_connections=0,
            probe=None,
            scaling=SCALING_LANE,
        ),
        Profile(
            name="full",
            description=(
                "every server on every scenario at 1, 10, 50 and 200 connections, each without "
                "pipelining and with 16 and 256 pipelined; 5 runs of 10 s; idle memory with 5000 "
                "connections; the full probe (many hours with every peer: select servers and "
                "scenarios)"
            ),
            cells=_product((1, 10, 50, 200), (0, 16, 256)),
            runs=5,
            duration=10.0,
            warmup=3.0,
            idle_connections=5000,
            probe=(),
        ),
        Profile(
            name="engine",
            description=(
                "the engine (peregrine-hello), the same engine built from "
                "--before-ref (peregrine-hello-before; default 5b5bd28, the last commit of "
                "2026-11-22), the floor and hyper-flush on plaintext, server CPU per request "
                "in the four lanes c=1 and c=50 without pipelining, 64 connections x 16 and x 256 "
                "pipelined; 40 rounds of 2 s per cell in blocks (a cell's servers back to back, "
                "in a random order) with 95% intervals of the per-round ratios; idle "
                "memory with 1000 connections (about 25 minutes on 2 CPUs)"
            ),
            servers=ENGINE_SERVERS,
            scenarios=("plaintext",),
            cells=ENGINE_LANES,
            runs=40,
            duration=2.0,
            warmup=1.0,
            idle_connections=1000,
            probe=None,
        ),
        Profile(
            name="framework",
            description=(
                "the framework's targets: Peregrine on plaintext, param and json, and the bare "
                "engine (peregrine-hello) on plaintext beside it, CPU per request at 50 "
                "connections without pipelining and at 64 with 16 pipelined; 5 runs of 5 s"
            ),
            servers=("peregrine", "peregrine-hello"),
            scenarios=("plaintext", "param", "json"),
            cells=((50, 0), (64, 16)),
            runs=5,
            duration=5.0,
            warmup=2.0,
            idle_connections=0,
            probe=None,
        ),
        # The database scenarios against a real PostgreSQL (peregrine_lab/database.py).
        Profile(
            name="db",
            description=(
                "the database scenarios (db, queries, fortunes, updates of "
                "contract/db.json) against a real PostgreSQL pinned to the load generator's CPUs, "
                "at 50 and 256 connections; 3 runs of 3 s per cell; server CPU and PostgreSQL CPU "
                "per request"
            ),
            scenarios=None,
            cells=((50, 0), (256, 0)),
            runs=3,
            duration=3.0,
            warmup=1.0,
            idle_connections=0,
            probe=None,
            timeout=10.0,
            database=True,
            # ntex's database tests are measured by the tfb profile, which builds rust-tfb.
            skip_servers=TFB_ONLY_SERVERS,
        ),
        Profile(
            name="tfb",
            description=(
                "TechEmpower's six tests as it runs them: plaintext at 256 connections x 16 "
                "pipelined and without pipelining, json, db, queries (20), fortunes and updates "
                "(20) at 256 connections, for Peregrine's framework, TechEmpower's Rust leaders "
                "(may-minihttp, xitca-web, ntex: lab/peers/rust-tfb) and hyper, axum and "
                "actix-web in their TechEmpower setups; PostgreSQL pinned to the load "
                "generator's CPUs, server CPU and PostgreSQL CPU per request apart; 5 runs of "
                "5 s per cell (about 20 minutes on 2 CPUs)"
            ),
            servers=TFB_SERVERS,
            scenarios=("plaintext", "json", "db", "queries", "fortunes", "updates"),
            lanes=TFB_LANES,
            runs=5,
            duration=5.0,
            warmup=2.0,
            idle_connections=0,
            probe=None,
            timeout=10.0,
            database=True,
        ),
    ]
}


def with_overrides(
    profile: Profile,
    *,
    concurrency: list[int] | None = None,
    pipeline: list[int] | None = None,
    runs: int | None = None,
    duration: float | None = None,
    servers: list[str] | None = None,
    scenarios: list[str] | None = None,
) -> Profile:
    """Apply command-line overrides. Giving --concurrency or --pipeline turns the cells into the
    product of the two lists (the dimension not given keeps the profile's distinct values), and
    applies pipelining to every selected scenario."""
    p = profile
    if concurrency or pipeline:
        conc = concurrency or sorted({c for c, _ in p.cells})
        pipe = pipeline or sorted({d for _, d in p.cells})
        p = replace(p, cells=_product(conc, pipe), sweep_scenarios=None, lanes=())
    if runs is not None:
        p = replace(p, runs=runs, lanes=tuple(replace(ln, runs=None) for ln in p.lanes))
        p = replace(p, scaling=p.scaling and replace(p.scaling, runs=runs))
    if duration is not None:
        p = replace(p, duration=duration, lanes=tuple(replace(ln, duration=None) for ln in p.lanes))
        p = replace(p, scaling=p.scaling and replace(p.scaling, duration=duration))
    if servers:
        p = replace(p, servers=tuple(servers), skip_servers=())
    if scenarios:
        p = replace(p, scenarios=tuple(scenarios))
    return p


@dataclass(frozen=True)
class CpuSplit:
    """Which CPUs the server and the load generator are pinned to (taskset lists)."""

    server: tuple[int, ...]
    client: tuple[int, ...]
    notes: list[str] = field(default_factory=list)

    @property
    def server_list(self) -> str:
        return ",".join(map(str, self.server))

    @property
    def client_list(self) -> str:
        return ",".join(map(str, self.client))

    @property
    def workers(self) -> int:
        return len(self.server)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """Parse a taskset-style CPU list: "1", "0,2", "2-3", "0,4-5"."""
    cpus: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            lo, hi = part.split("-", 1)
            lo_i, hi_i = int(lo), int(hi)
            if hi_i < lo_i:
                raise ValueError(f"bad CPU range {part!r}")
            cpus.extend(range(lo_i, hi_i + 1))
        else:
            cpus.append(int(part))
    if not cpus:
        raise ValueError(f"empty CPU list {text!r}")
    return tuple(sorted(set(cpus)))


def available_cpus() -> tuple[int, ...]:
    """CPUs this process may run on (respects an outer taskset/cgroup), sorted."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return tuple(range(os.cpu_count() or 1))


def cpu_split(server: str | None = None, client: str | None = None, cpus=None) -> CpuSplit:
    """Default split: the server gets the second half of the CPUs, the load generator the first
    half (on 2 CPUs: server on CPU 1, wrk on CPU 0). Either side can be given explicitly."""
    cpus = tuple(cpus) if cpus is not None else available_cpus()
    notes = []
    half = len(cpus) // 2
    if server is not None:
        srv = parse_cpu_list(server)
    elif len(cpus) >= 2:
        srv = cpus[half:]
    else:
        srv = cpus
    if client is not None:
        cli = parse_cpu_list(client)
    elif len(cpus) >= 2 and server is None:
        cli = cpus[:half]
    else:
        cli = tuple(c for c in cpus if c not in srv) or cpus
    if set(srv) & set(cli):
        notes.append(
            f"server CPUs {srv} and load-generator CPUs {cli} overlap: figures include "
            "contention between the two"
        )
    return CpuSplit(server=srv, client=cli, notes=notes)
