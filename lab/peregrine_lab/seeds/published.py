"""The seeds' published figures, as their write-ups print them (the team's reference copies).
Rows of systems no registry has (NURL, Kourier, lithium, httpbeast, NextRush, uWebSockets.js) are
kept here and marked "not re-run" in the tables."""

from __future__ import annotations

NURL = {
    "source": "NURL benchmark (000): i7-5930K, 6 cores / 12 threads, oha 1.8.0, median of 3 x 10 s",
    "concurrency": [1, 10, 50, 200],
    # server -> metric -> figures per concurrency (req/s; p50 and p99 in ms)
    "rows": {
        "NURL": {
            "rps": [14451, 68960, 60897, 59044],
            "p50_ms": [0.06, 0.08, 0.10, 0.11],
            "p99_ms": [0.14, 0.56, 0.67, 0.62],
        },
        "Rust": {
            "rps": [14507, 47703, 86699, 114694],
            "p50_ms": [0.07, 0.15, 0.41, 1.33],
            "p99_ms": [0.11, 1.16, 2.82, 6.19],
        },
        "Node": {
            "rps": [8708, 16726, 17108, 15555],
            "p50_ms": [0.11, 0.54, 2.90, 12.89],
            "p99_ms": [0.22, 1.98, 6.13, 20.95],
        },
    },
    "not_rerun": ["NURL"],
    "cores": 12,
}

RUST_HTTP = {
    "source": "rust-http comparisons (001, 2013): Core 2 Duo laptop (2 cores), Node 0.10.20, "
    "Go 1.1.2, Rust 0.9-pre with rust-http",
    "ab": {
        "concurrency": [1, 2, 3, 4, 8],
        "Node": [4300, 5300, 5450, 5650, 5750],
        "Go": [4100, 9500, 10000, 10500, 10750],
        "Rust": [4825, 5640, 6575, 7100, 7900],
    },
    "wrk": {
        "concurrency": [1, 2, 3, 8],
        "Node": [10400, 11400, 11900, 12400],
        "Go": [8600, 21000, 22000, 21000],
        "Rust": [10100, 12300, 13300, 15000],
    },
    # rust-http (2013) is not in any registry: today's "Rust" row is hyper.
    "not_rerun": ["Rust"],
    "cores": 2,
}

KOURIER = {
    "source": "Kourier blog (002): Ryzen 5 1600, 6 cores / 12 threads, 6 to the server and 6 to "
    "wrk, wrk -c 512 -d 15 -t 6 --latency, pipeline.lua 256",
    # req/s, latency avg / p50 / p99 in ms (wrk printed Kourier's p99 as 0.00us: overflow)
    "rows": {
        "Kourier": {
            "rps": 12138068.83,
            "avg_ms": 4.41,
            "p50_ms": 4.23,
            "p99_ms": None,
            "timeouts": 0,
        },
        "Rust (Hyper)": {
            "rps": 4382914.88,
            "avg_ms": 24.34,
            "p50_ms": 19.89,
            "p99_ms": 80.51,
            "timeouts": 0,
        },
        "Go (net/http)": {
            "rps": 231080.00,
            "avg_ms": 491.73,
            "p50_ms": 402.08,
            "p99_ms": 1810.0,
            "timeouts": 722,
        },
    },
    "not_rerun": ["Kourier"],
    "cores": 6,
}

NEXTRUSH = {
    "source": "NextRush benchmarks (003): i5-8300H, 8 threads, Node v25.1.0, autocannon v8 "
    "(100 connections, pipelining 10, 10 s) and wrk 4.2.0 (no pipelining, 60 s x 5, 8 threads)",
    # scenario -> framework -> (RPS, p50 ms, p99 ms)
    "autocannon": {
        "hello": {
            "Fastify": (48045, 15, 37),
            "NextRush v3": (43268, 16, 43),
            "Hono": (37476, 19, 48),
            "Koa": (34683, 20, 56),
            "Express": (23739, 50, 69),
        },
        "param": {
            "Fastify": (45852, 15, 37),
            "NextRush v3": (38983, 19, 45),
            "Hono": (35144, 20, 50),
            "Koa": (33893, 21, 52),
            "Express": (22228, 44, 70),
        },
        "query": {
            "Fastify": (36618, 20, 51),
            "NextRush v3": (30876, 23, 47),
            "Hono": (28619, 27, 50),
            "Koa": (27637, 26, 55),
            "Express": (20769, 47, 58),
        },
        "post": {
            "Fastify": (21412, 45, 71),
            "NextRush v3": (20438, 47, 73),
            "Koa": (17664, 55, 75),
            "Express": (14417, 66, 104),
            "Hono": (12625, 75, 114),
        },
        "mixed": {
            "Fastify": (48493, 15, 32),
            "NextRush v3": (43283, 16, 41),
            "Hono": (38759, 18, 39),
            "Koa": (35566, 20, 47),
            "Express": (23783, 51, 63),
        },
    },
    # wrk profile, NextRush alone: scenario -> connections -> (mean RPS, stddev, p50 ms, p99 ms).
    # The page's table headings were lost; each is named from the caption under it.
    "wrk": {
        "text": {
            1: (25928, 531, 0.032, 0.105),
            64: (29935, 565, 2.04, 3.09),
            256: (29539, 441, 8.42, 12.59),
            512: (29145, 561, 16.95, 23.90),
        },
        "hello": {
            1: (26502, 452, 0.033, 0.079),
            64: (29463, 284, 2.05, 2.98),
            256: (29244, 821, 8.43, 12.59),
            512: (28855, 286, 17.06, 23.86),
        },
        "param": {
            1: (26095, 147, 0.034, 0.077),
            64: (27732, 278, 2.22, 3.08),
            256: (27213, 333, 9.11, 12.66),
            512: (26680, 240, 18.53, 26.60),
        },
        "post": {
            1: (14521, 164, 0.060, 0.125),
            64: (17609, 334, 3.64, 4.78),
            256: (16758, 397, 15.27, 19.73),
            512: (16541, 224, 28.76, 36.57),
        },
        "middleware": {
            1: (21767, 236, 0.041, 0.088),
            64: (31296, 91, 1.97, 2.94),
            256: (30373, 532, 7.96, 11.65),
            512: (29579, 537, 16.55, 23.92),
        },
    },
    "not_rerun": ["NextRush v3"],
    "cores": 8,
}

LEMIRE = {
    "source": "Lemire's blog (004, 2023): Ice Lake server, 64 cores, `bombardier -c 10` and "
    "`-c 1000` on /simple, out of the box",
    # system -> (c=10 mean, +/-, c=1000 mean, +/-)
    "rows": {
        "Nim 2.0 and httpbeast": (315000, 18000, 350000, 60000),
        "GCC12 (C++) + lithium": (190000, 60000, 385000, 80000),
        "Go 1.19": (95000, 30000, 250000, 45000),
        "Node.js 20 and uWebSockets.js": (100000, 25000, 100000, 35000),
        "Bun 1.04": (80000, 15000, 65000, 20000),
        "Node.js 20 (JavaScript)": (45000, 7000, 41000, 10000),
        "Bun + fastify": (40000, 6000, 35000, 9000),
    },
    "not_rerun": [
        "Nim 2.0 and httpbeast",
        "GCC12 (C++) + lithium",
        "Node.js 20 and uWebSockets.js",
    ],
    "cores": 64,
}
