"""The five seed experiments: which servers, with which tool and flags, on which paths, each as
its seed ran it, scaled in duration only (every scaled figure is stated in `notes`).

A Cell is one load-generator invocation (run `runs` times); a Lane is one server (a peers.toml
entry of lab/peers/seeds) with the seed row it re-runs, if any. Lanes marked `check` are the
measured checks behind the ratios' notes (e.g. hyper on 1 worker instead of its default)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from . import published, tools

AB_REQUESTS = 10_000
NEXTRUSH_BODY = '{"name":"John Doe","email":"john@example.com"}'
BEARER = "Authorization: Bearer seeds"


@dataclass(frozen=True)
class Cell:
    """One invocation of the experiment's tool: `table` and `column` place it in the report."""

    table: str
    column: int
    tool: str
    argv: list[str]
    runs: int
    seconds: float


@dataclass(frozen=True)
class Lane:
    """One server of an experiment. `seed_row` is the row of the seed's table it re-runs (ratios
    are taken between lanes that have one); `only` limits it to some (table, column) cells;
    `check` names the measured check it is (shown under the table, not in the ratios)."""

    peer: str
    row: str
    seed_row: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    only: tuple[tuple[str, int], ...] | None = None
    check: str = ""
    split: bool | None = None  # None: the experiment's own core split


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    seed: str
    split: bool  # True: server on CPU 1, the tool on CPU 0 (the seed halved its cores)
    lanes: list[Lane]
    cells: Callable[[str], list[Cell]]
    reference: str  # the seed row ratios are taken to (present in both tables)
    published: dict
    notes: list[str]
    reasons: list[str]


def _nurl_cells(base: str) -> list[Cell]:
    return [
        Cell("oha", c, "oha", tools.oha_argv(base + "/", connections=c, seconds=3), 3, 3)
        for c in (1, 10, 50, 200)
    ]


def _rust_http_cells(base: str) -> list[Cell]:
    ab = [
        Cell("ab", c, "ab", tools.ab_argv(base + "/", requests=AB_REQUESTS, concurrency=c), 1, 0)
        for c in (1, 2, 3, 4, 8)
    ]
    wrk = [
        Cell("wrk", c, "wrk", tools.wrk_argv(base + "/", connections=c, threads=c, seconds=3), 1, 3)
        for c in (1, 2, 3, 8)
    ]
    return ab + wrk


def _kourier_cells(base: str) -> list[Cell]:
    argv = tools.wrk_argv(
        base + "/hello",
        connections=512,
        threads=6,
        seconds=5,
        latency=True,
        script=tools.PIPELINE_LUA,
        script_args=("256",),
    )
    return [Cell("wrk", 512, "wrk", argv, 1, 5)]


NEXTRUSH_REQUESTS = {
    "hello": [{"method": "GET", "path": "/"}],
    "param": [{"method": "GET", "path": "/users/123"}],
    "query": [{"method": "GET", "path": "/search?q=test"}],
    "post": [
        {
            "method": "POST",
            "path": "/users",
            "headers": {"content-type": "application/json"},
            "body": NEXTRUSH_BODY,
        }
    ],
}
NEXTRUSH_REQUESTS["mixed"] = [
    r for k in ("hello", "param", "query", "post") for r in NEXTRUSH_REQUESTS[k]
]
NEXTRUSH_WRK = {
    "text": ("/text", ()),
    "hello": ("/", ()),
    "param": ("/users/123", ()),
    "post": ("/users", ("-s", str(tools.SCRIPTS_DIR / "post.lua"))),
    "middleware": ("/middleware", ("-H", BEARER)),
}
NEXTRUSH_WRK_CONNECTIONS = (1, 64, 256, 512)
NEXTRUSH_WRK_RUNS = 2


def _nextrush_cells(base: str) -> list[Cell]:
    cells = [
        Cell(
            f"autocannon:{name}",
            100,
            "autocannon",
            tools.autocannon_argv(base, connections=100, pipelining=10, seconds=3, requests=reqs),
            1,
            3,
        )
        for name, reqs in NEXTRUSH_REQUESTS.items()
    ]
    for name, (path, extra) in NEXTRUSH_WRK.items():
        for c in NEXTRUSH_WRK_CONNECTIONS:
            # wrk needs at least one connection per thread: 8 threads, fewer at c=1.
            argv = tools.wrk_argv(
                base + path, connections=c, threads=min(8, c), seconds=2, latency=True
            )
            cells.append(Cell(f"wrk:{name}", c, "wrk", argv + list(extra), NEXTRUSH_WRK_RUNS, 2))
    return cells


def _lemire_cells(base: str) -> list[Cell]:
    return [
        Cell(
            "bombardier",
            c,
            "bombardier",
            tools.bombardier_argv(base + "/simple", connections=c, seconds=3),
            3,
            3,
        )
        for c in (10, 1000)
    ]


_AUTOCANNON = tuple((f"autocannon:{k}", 100) for k in NEXTRUSH_REQUESTS)

EXPERIMENTS: dict[str, Experiment] = {
    "nurl": Experiment(
        name="nurl",
        title="NURL (000): oha, keep-alive, GET / → Hello, World!\\n",
        seed="nurl",
        split=False,
        lanes=[
            Lane("hyper", "Rust hyper (multi-thread runtime, default workers)", "Rust"),
            Lane("node-http", "Node node:http", "Node"),
            Lane("peregrine", "Peregrine (framework)"),
            Lane("peregrine-engine", "Peregrine engine"),
            Lane(
                "hyper",
                "Rust hyper, WORKERS=1",
                env={"WORKERS": "1"},
                only=(("oha", 50), ("oha", 200)),
                check="hyper's runtime on 1 worker instead of one per CPU",
            ),
        ],
        cells=_nurl_cells,
        reference="Node",
        published=published.NURL,
        notes=[
            "3 x 3 s per cell instead of 3 x 10 s (median of the 3); oha 1.8.0 as the seed.",
            "Server and oha share both CPUs, as the seed's shared its 12 (no core split).",
        ],
        reasons=[
            "core count: tokio's multi-thread runtime starts one worker per CPU (12 on the seed's "
            "machine, 2 here, shared with oha) while node:http runs on one thread, so hyper/Node "
            "grows with the cores; the WORKERS=1 check row measures hyper on one worker.",
        ],
    ),
    "rust-http": Experiment(
        name="rust-http",
        title="rust-http (001, 2013): ab (a connection per request) and wrk -c N -t N, GET /",
        seed="rust-http",
        split=False,
        lanes=[
            Lane("node-http", "Node node:http", "Node"),
            Lane("go", "Go net/http", "Go"),
            Lane("hyper", "Rust: hyper (rust-http is gone)", "Rust"),
            Lane("peregrine", "Peregrine (framework)"),
            Lane("peregrine-engine", "Peregrine engine"),
            Lane(
                "go",
                "Go net/http, GOMAXPROCS=1",
                env={"GOMAXPROCS": "1"},
                only=(("ab", 1), ("ab", 2), ("wrk", 1), ("wrk", 2)),
                check="Go on one CPU: how much of its 1→2 speed-up is the second core",
            ),
        ],
        cells=_rust_http_cells,
        reference="Node",
        published=published.RUST_HTTP,
        notes=[
            f"ab -n {AB_REQUESTS} -c N as the seed (not scaled); wrk 3 s per cell instead of 10 s.",
            "The seed's Rust row is rust-http on Rust 0.9-pre (2013), in no registry: its row here "
            "is today's hyper, so Rust's ratios compare two different servers.",
            "Two CPUs shared by server and tool, as the seed's Core 2 Duo.",
        ],
        reasons=[
            "version: the seed ran Node 0.10, Go 1.1 and rust-http (2013); today's Node 26, Go "
            "1.27 and hyper 1.x are other servers, so every ratio may move; the GOMAXPROCS=1 "
            "check row measures how much of Go's speed-up is the second core.",
        ],
    ),
    "kourier": Experiment(
        name="kourier",
        title="Kourier (002): wrk -c 512 -t 6 --latency, pipeline.lua 256, GET /hello",
        seed="kourier",
        split=True,
        lanes=[
            Lane("hyper", "Rust hyper (request timer)", "Rust (Hyper)"),
            Lane("go", "Go net/http (read, idle, write timers)", "Go (net/http)"),
            Lane("peregrine", "Peregrine (framework)"),
            Lane("peregrine-engine", "Peregrine engine"),
            Lane(
                "hyper",
                "Rust hyper, pipeline_flush on",
                env={"PIPELINE_FLUSH": "1"},
                only=(("wrk", 512),),
                check="hyper writing pipelined answers together (TechEmpower's hyper setting)",
            ),
            Lane(
                "hyper",
                "Rust hyper, both CPUs shared with wrk",
                only=(("wrk", 512),),
                check="no core split (server and wrk on both CPUs)",
                split=False,
            ),
            Lane(
                "go",
                "Go net/http, both CPUs shared with wrk",
                only=(("wrk", 512),),
                check="no core split (server and wrk on both CPUs)",
                split=False,
            ),
        ],
        cells=_kourier_cells,
        reference="Go (net/http)",
        published=published.KOURIER,
        notes=[
            "-d 5 instead of -d 15; otherwise the seed's flags (-c 512 -t 6 --latency, depth 256).",
            "Half the CPUs each, as the seed: the server on CPU 1 (so hyper's and Go's runtimes "
            "start 1 worker, the seed's 6), wrk's 6 threads on CPU 0 (taskset).",
        ],
        reasons=[
            "hyper's write path: with pipeline_flush off (hyper's default, this lane) hyper "
            "writes each pipelined answer on its own, so 256-deep pipelines cost it a write per "
            "request; the pipeline_flush check row measures hyper with it on.",
            "core count: the seed gave 6 cores to each server, here 1; the check rows without "
            "the core split give both CPUs to server and wrk.",
        ],
    ),
    "nextrush": Experiment(
        name="nextrush",
        title="NextRush (003): autocannon v8 -c 100 -p 10, and wrk -t 8 without pipelining",
        seed="nextrush",
        split=False,
        lanes=[
            Lane("fastify", "Fastify", "Fastify"),
            # NextRush's wrk profile measured NextRush alone: Fastify is the bridge to it.
            Lane("express", "Express", "Express", only=_AUTOCANNON),
            Lane("hono", "Hono (node-server)", "Hono", only=_AUTOCANNON),
            Lane("koa", "Koa", "Koa", only=_AUTOCANNON),
            Lane("peregrine", "Peregrine (framework)"),
            Lane(
                "peregrine",
                "Peregrine (framework), WORKERS=1",
                env={"WORKERS": "1"},
                only=(("autocannon:hello", 100),),
                check="Peregrine on one worker, as the Node frameworks' one process",
            ),
            Lane(
                "fastify",
                "Fastify, server on CPU 1, autocannon on CPU 0",
                only=(("autocannon:hello", 100),),
                check="core split: autocannon (Node) no longer takes CPU from the server",
                split=True,
            ),
        ],
        cells=_nextrush_cells,
        reference="Fastify",
        published=published.NEXTRUSH,
        notes=[
            "autocannon: 3 s per scenario instead of 10 s; 100 connections, pipelining 10 as the "
            "seed; 'mixed' cycles hello, param, query and POST on each connection.",
            f"wrk profile: {NEXTRUSH_WRK_RUNS} x 2 s per cell instead of 5 x 60 s, 8 threads "
            "(1 at c=1: wrk needs a connection per thread); Peregrine, and Fastify as a reference "
            "(NextRush itself is in no registry).",
            "Server and tools share both CPUs (the seed did not split its 8); Peregrine starts "
            "its default one worker per CPU, the Node frameworks one process.",
            "middleware: timing, logging (formatted, not written), auth check, CORS; body "
            "parsing is each framework's own.",
        ],
        reasons=[
            "runtime and versions: Node 26 here, Node 25.1 in the seed, and newer Fastify 5 / "
            "Express 5 / Hono 4 / Koa 3 releases; with 2 CPUs autocannon (itself Node) takes "
            "one from the server: the check rows measure both effects on the hello scenario.",
        ],
    ),
    "lemire": Experiment(
        name="lemire",
        title="Lemire (004): bombardier -c 10 and -c 1000, GET /simple, out of the box",
        seed="lemire",
        split=False,
        lanes=[
            Lane("go", "Go net/http", "Go 1.19"),
            Lane("fastify", "Node.js (Fastify, the post's code)", "Node.js 20 (JavaScript)"),
            Lane("bun", "Bun (Bun.serve)", "Bun 1.04"),
            Lane("bun-fastify", "Bun + Fastify", "Bun + fastify"),
            Lane("peregrine", "Peregrine (framework)"),
            Lane("peregrine-engine", "Peregrine engine"),
            Lane(
                "go",
                "Go net/http, GOMAXPROCS=1",
                env={"GOMAXPROCS": "1"},
                only=(("bombardier", 10), ("bombardier", 1000)),
                check="Go on one CPU instead of all",
            ),
        ],
        cells=_lemire_cells,
        reference="Go 1.19",
        published=published.LEMIRE,
        notes=[
            "3 runs of 3 s per cell (bombardier's default 10 s scaled), mean ± standard deviation "
            "as the post's ±.",
            "Server and bombardier share both CPUs (the post's 64 cores were not split).",
        ],
        reasons=[
            "core count: Go's runtime uses every CPU (64 in the post, 2 here, shared with "
            "bombardier) while Node and Bun serve on one thread; the GOMAXPROCS=1 check row "
            "measures Go on one.",
        ],
    ),
}

ORDER = ["nurl", "rust-http", "kourier", "nextrush", "lemire"]
