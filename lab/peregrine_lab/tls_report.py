"""report.md and charts of a protocols run (tls_lanes.py) from its results.json: the negotiated
handshake per server, parity, CPU per request per lane with 95% intervals, the targets, memory
per idle TLS / HTTP/2 connection beside the plaintext figure, and the busy time of the CPUs."""

from __future__ import annotations

import json
from pathlib import Path

from . import config, figures, stats, tls_lanes

NA = "n/a"
PLAINTEXT_RESULTS = config.LAB_DIR / "results" / "standard" / "results.json"
PLAINTEXT_PEER = {
    "peregrine-tls": "peregrine-hello",
    "nginx-tls": "nginx",
    "axum-tls": "axum",
    "actix-tls": "actix",
    "go-nethttp-tls": "go-nethttp",
    "node-https": "node-http",
    "node-http2": "node-http",
}
"""The plaintext peer of each TLS server, whose idle memory the committed standard run holds."""


SHARED_MACHINE_SHARE = 0.05
"""Median share of the server CPU's time taken by other work above which the report says the
machine was shared (below it, the run had the CPU to itself within measurement noise)."""


def _quietness(res: dict) -> str:
    """The report's one-line verdict on the machine's state, from the runs' measured share of
    the server CPU that went to anything but the measured server."""
    busy = [
        r["server_cpus_other_share"]
        for c in res.get("cells", [])
        for r in c.get("runs", [])
        if r.get("server_cpus_other_share") is not None
    ]
    share = stats.median(busy)
    where = (
        'It is in every row ("other on server CPU") and summarised below; figures with much '
        "other work are noisier, and the intervals say how much."
    )
    if share is None:
        return f"**Other work on the machine was not measured in this run.** {where}"
    if share > SHARED_MACHINE_SHARE:
        return (
            f"**The machine was shared**: a median {share * 100:.1f}% of the server CPU's time "
            f"went to other work during the runs. {where}"
        )
    return (
        f"**The machine was quiet**: a median {share * 100:.1f}% of the server CPU's time went "
        f"to other work during the runs. {where}"
    )


def _f(v, fmt="{:.2f}") -> str:
    return NA if v is None else fmt.format(v)


def _ci(ci) -> str:
    return NA if not ci else f"[{ci[0]:.2f}, {ci[1]:.2f}]"


def _kib(b) -> str:
    return NA if b is None else f"{b / 1024:.1f} KiB"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out + [""]


def _labels(res: dict) -> dict[str, str]:
    """Each server's label with the TLS library it ran beside it, so that every comparison in
    the report says whose TLS it measured (nginx and Node ride on OpenSSL; which one matters)."""
    out = {}
    for s in res.get("servers", []):
        label = s.get("label", s["name"])
        lib = tls_library(s["name"], res.get("tools") or {})
        out[s["name"]] = f"{label} [{lib}]" if lib else label
    return out


def tls_library(server: str, tools: dict) -> str | None:
    """The TLS implementation behind a protocols peer, with its version where the run recorded
    it: the system OpenSSL for nginx (Debian's nginx links libssl), Node's bundled OpenSSL
    (`process.versions.openssl` of the peers' node), Go's crypto/tls, rustls for the rest.

    >>> tls_library("nginx-tls", {"openssl": "OpenSSL 3.0.19 27 Jan 2026"})
    'OpenSSL 3.0.19 27 Jan 2026'"""
    if server.startswith("nginx"):
        raw = tools.get("openssl") or ""
        # `openssl version` names the libssl it loads after "Library:" when the two differ.
        lib = raw.split("Library:", 1)[1].rstrip(") ") if "Library:" in raw else raw
        return lib.strip() or "OpenSSL (version not recorded)"
    if server.startswith("node"):
        v = tools.get("node_openssl")
        return f"OpenSSL {v} (bundled with Node)" if v else "Node's bundled OpenSSL"
    if server.startswith("go"):
        return f"Go crypto/tls ({tools['go']})" if tools.get("go") else "Go crypto/tls"
    if server.startswith(("peregrine", "axum", "actix")):
        return "rustls 0.23, ring"
    return None


def plaintext_idle(path: Path = PLAINTEXT_RESULTS) -> dict[str, float]:
    """Idle memory per plaintext connection (bytes) per server of a committed plaintext run."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for s in data.get("servers", []):
        per = (s.get("idle_memory") or {}).get("per_connection_bytes")
        if per is not None:
            out[s["name"]] = per
    return out


def _methods(res: dict) -> set[str]:
    """The ratio methods (paired, independent) of this report's ratios to nginx and targets."""
    out = {t["method"] for t in tls_lanes.targets(res) if t.get("method")}
    for mode in tls_lanes.MODES:
        ref = tls_lanes.find_cell(res, "nginx-tls", mode)
        for c in res.get("cells", []):
            if ref is not None and c["mode"] == mode and c["status"] == "ok" and c is not ref:
                runs = (c.get("runs") or [], ref.get("runs") or [])
                out.add(stats.ratio_method(*runs, "cpu_us_per_req"))
    return out


def _lane_rows(res: dict, mode: str, labels: dict) -> list[list[str]]:
    cells = [c for c in res.get("cells", []) if c["mode"] == mode]
    ref = tls_lanes.find_cell(res, "nginx-tls", mode)
    rows = []
    ok = [c for c in cells if c["status"] == "ok"]
    ok.sort(key=lambda c: c["median"]["cpu_us_per_req"] or float("inf"))
    for c in ok + [c for c in cells if c["status"] != "ok"]:
        if c["status"] != "ok":
            rows.append(
                [
                    labels.get(c["server"], c["server"]),
                    c["status"],
                    NA,
                    NA,
                    NA,
                    NA,
                    NA,
                    (c.get("message") or "")[:120],
                ]  # fmt: skip
            )
            continue
        med, cv = c["median"], c["cv"]
        ratio = ci = None
        if ref is not None:
            est = tls_lanes.cpu_ratio(c, ref)
            if est is not None:
                ratio, ci = est.ratio, est.ci
        busy = [r.get("server_cpus_other_share") for r in c["runs"]]
        rows.append(
            [
                labels.get(c["server"], c["server"]),
                f"{med['rps']:,.0f}",
                _f(med["cpu_us_per_req"]),
                _ci(c.get("cpu_ci")),
                _f(cv.get("cpu_us_per_req") and cv["cpu_us_per_req"] * 100, "{:.1f}%"),
                f"{_f(ratio)} {_ci(ci)}",
                _f(stats.median(busy) and stats.median(busy) * 100, "{:.1f}%"),
                f"{len(c['runs'])} runs",
            ]
        )
    return rows


def render(res: dict) -> str:
    labels = _labels(res)
    st = res.get("settings", {})
    m = res.get("machine", {})
    lines = [
        "# Peregrine lab: HTTPS and HTTP/2 lanes (`protocols`)",
        "",
        f"Generated {res.get('generated_at')} by `{res.get('command')}` "
        f"(git {res.get('git', {}).get('commit', '?')[:12]}"
        f"{' + uncommitted changes' if res.get('git', {}).get('dirty') else ''}); "
        f"{'complete' if res.get('complete') else 'INCOMPLETE'} run, "
        f"{_f(res.get('measure_seconds'), '{:.0f}')} s of measuring, "
        f"{_f(res.get('wall_seconds'), '{:.0f}')} s in all.",
        "",
        f"> {figures.staleness(res)}",
        "",
        _quietness(res),
        "",
        "## Method",
        "",
        f"- {res.get('profile_description')}.",
        f"- Server pinned to CPU(s) {st.get('server_cpus')} with WORKERS={st.get('workers')}, "
        f"load generators to CPU(s) {st.get('client_cpus')}; CPU time of the server's process "
        f"tree from `/proc/PID/task/*/schedstat` ({st.get('cpu_time', {}).get('source', '?')}; "
        f"IRQ time accounting: {st.get('cpu_time', {}).get('irq_time_accounting', '?')}).",
        f"- {st.get('runs')} runs of {st.get('duration')} s per cell in randomised interleaved "
        f"rounds (seed {st.get('order_seed')}"
        + (
            "; blocked: the modes in a random order, the servers of a mode back to back in a "
            "random order"
            if st.get("order") == "blocked"
            else ""
        )
        + "), a 1 s warm-up in the first round; medians, "
        "distribution-free 95% intervals of medians (order statistics; none below 6 runs); "
        "a target is met only "
        "when the ratio interval's upper bound is ≤ 1.",
        "- Ratios between two servers' cells of a lane: the geometric mean of the per-round "
        "ratios (round k of both ran in the same interleaved round, so the ratio cancels the "
        "load drift both shared), [a, b] the paired t 95% interval on their logs; where two "
        f"cells share fewer than {stats.MIN_PAIRED_ROUNDS} rounds, geometric mean / geometric "
        "mean with the Welch t interval on the logs. Methods used here: "
        + (", ".join(sorted(_methods(res))) or "none")
        + ".",
        "- Lanes: " + "; ".join(f"`{k}`: {v}" for k, v in st.get("modes", {}).items()) + ".",
        "- Handshake lane: ab opens a new TCP connection and a new OpenSSL session per request "
        "and never resumes; wrk with `Connection: close` would resume (it keeps its SSL object "
        "across reconnects), so it is not used for this lane.",
        f"- Certificate: {res.get('certificate', {}).get('description')}, made with openssl for "
        "this run and given to every server (TLS_CERT, TLS_KEY).",
        "- Every client (wrk, ab, h2load, curl, openssl s_client) reads this OpenSSL setting, so "
        "every server negotiates the same handshake (servers choose differently from a wider "
        "offer: Go prefers AES-128-GCM, OpenSSL and rustls follow the client's order):",
        "",
        "```",
        res.get("certificate", {}).get("client_openssl_conf", "").strip(),
        "```",
        "",
        f"- Machine: {m.get('cpu_model', '?')}, {m.get('nproc', '?')} CPUs (load average at "
        f"start {m.get('loadavg_at_start')}), kernel "
        f"{m.get('kernel', '?')}. Tools: "
        + ", ".join(f"{k} {v}" for k, v in res.get("tools", {}).items() if v)
        + ".",
        "",
        "## Targets",
        "",
    ]
    rows = []
    for t in tls_lanes.targets(res):
        met = {True: "**met**", False: "**not met**", None: NA}[t["met"]]
        rows.append(
            [
                t["what"],
                labels.get(t["against"], t["against"]),
                _f(t.get("mine")),
                _f(t.get("theirs")),
                _f(t["ratio"], "{:.3f}"),
                NA if not t["ci"] else f"[{t['ci'][0]:.3f}, {t['ci'][1]:.3f}]",
                t.get("method") or NA,
                met,
            ]
        )
    lines += _table(
        [
            "target",
            "against",
            "Peregrine CPU µs/req",
            "theirs",
            "ratio",
            "95% interval",
            "method",
            "verdict",
        ],
        rows,
    )
    for mode, title in tls_lanes.MODES.items():
        lines += [f"## Lane `{mode}`: {title}", ""]
        lines += _table(
            [
                "server",
                "req/s",
                "CPU µs/req (median)",
                "95% interval",
                "CV",
                "× nginx (95% interval)",
                "other on server CPU",
                "runs",
            ],
            _lane_rows(res, mode, labels),
        )
    hung = [
        f"{labels.get(c['server'], c['server'])} {c['mode']}: "
        + "; ".join(c["h2load_hangs_retried"])
        for c in res.get("cells", [])
        if c.get("h2load_hangs_retried")
    ]
    if hung:
        lines += ["h2load passes that did not exit and were stopped and run again:", ""]
        lines += [f"- {h}" for h in hung] + [""]
    lines += ["## Negotiated handshake and parity", ""]
    rows = []
    for s in res.get("servers", []):
        for proto in s.get("protocols", []):
            h = (s.get("handshake") or {}).get(proto) or {}
            p = (s.get("parity") or {}).get(proto) or {}
            rows.append(
                [
                    labels.get(s["name"], s["name"]),
                    proto,
                    h.get("protocol") or NA,
                    h.get("cipher") or NA,
                    h.get("key_exchange") or NA,
                    h.get("signature") or NA,
                    h.get("alpn") or NA,
                    "ok" if p.get("ok") else ("; ".join(p.get("problems") or []) or NA),
                ]
            )
    lines += _table(
        ["server", "lane protocol", "TLS", "cipher", "key exchange", "signature", "ALPN", "parity"],
        rows,
    )
    h2_tls = {
        (c["server"], json.dumps(r.get("negotiated"), sort_keys=True))
        for c in res.get("cells", [])
        if c["mode"] == "h2"
        for r in c.get("runs", [])
        if r.get("negotiated")
    }
    if h2_tls:
        lines += ["What h2load reported it negotiated in the HTTP/2 runs:", ""]
        for server, neg in sorted(h2_tls):
            lines.append(f"- {labels.get(server, server)}: `{neg}`")
        lines.append("")
    lines += [
        "Parity: HTTPS: `/plaintext` twice on one TLS keep-alive connection (Python's ssl, ALPN "
        "http/1.1), each answer checked against the contract (status, body, Content-Type, "
        "required headers); the wire length is kept and every wrk run's bytes per response are "
        "compared with it. HTTP/2: `/plaintext` twice with curl `--http2` (ALPN h2), the answer "
        "must be HTTP/2 and match the contract.",
        "",
        "## Memory per idle connection",
        "",
        f"{st.get('idle_connections')} connections each complete a TLS handshake, send one "
        "request and read its answer, then stay open; RSS growth of the server tree ÷ the "
        "connections. A fresh server process for each protocol. The plaintext column is the "
        "same server's plaintext peer in the committed standard run "
        "(lab/results/standard/results.json), measured the same way without TLS.",
        "",
    ]
    plain = plaintext_idle()
    rows = []
    for s in res.get("servers", []):
        im = s.get("idle_memory") or {}
        rows.append(
            [
                labels.get(s["name"], s["name"]),
                _kib((im.get("https") or {}).get("per_connection_bytes")),
                _kib((im.get("h2") or {}).get("per_connection_bytes")),
                _kib(plain.get(PLAINTEXT_PEER.get(s["name"], ""))),
            ]
        )
    lines += _table(["server", "idle TLS (HTTP/1.1)", "idle HTTP/2", "idle plaintext"], rows)
    busy = [
        r.get("server_cpus_other_share")
        for c in res.get("cells", [])
        for r in c.get("runs", [])
        if r.get("server_cpus_other_share") is not None
    ]
    cli = [
        r.get("client_cpus_other_share")
        for c in res.get("cells", [])
        for r in c.get("runs", [])
        if r.get("client_cpus_other_share") is not None
    ]

    def pct(v):
        return _f(None if v is None else v * 100, "{:.1f}%")

    lines += [
        "## Other work on the CPUs",
        "",
        f"Share of the server CPU's time spent on anything but the measured server, over "
        f"{len(busy)} runs: median {pct(stats.median(busy))}, max "
        f"{pct(max(busy) if busy else None)}. Share of the load generator's CPU spent on "
        f"anything but the load generator: median {pct(stats.median(cli))}, max "
        f"{pct(max(cli) if cli else None)}.",
        "",
        "## Versions",
        "",
    ]
    lines += _table(
        ["server", "version", "startup ms"],
        [
            [labels.get(s["name"], s["name"]), s.get("version") or NA, _f(s.get("startup_ms"))]
            for s in res.get("servers", [])
        ],
    )
    lines += ["Charts: `charts/cpu_per_request.svg`, `charts/idle_memory.svg`.", ""]
    return "\n".join(lines)


def save_chart(plt, fig, charts: Path, name: str) -> Path:
    """Lays `fig` out, writes it as `charts/NAME.svg` without a date (the same results make the
    same file) and closes it."""
    fig.tight_layout()
    charts.mkdir(parents=True, exist_ok=True)
    p = charts / f"{name}.svg"
    fig.savefig(p, metadata={"Date": None})
    plt.close(fig)
    return p


def charts(res: dict, out_dir: Path) -> list[Path]:
    """CPU per request per lane with the 95% interval as error bars; idle memory per protocol."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "peregrine-lab"
    plt.rcParams["svg.fonttype"] = "none"
    labels = _labels(res)
    d = out_dir / "charts"
    made = []
    modes = list(tls_lanes.MODES)
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.2), squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=True):
        cells = [c for c in res.get("cells", []) if c["mode"] == mode and c["status"] == "ok"]
        cells.sort(key=lambda c: -c["median"]["cpu_us_per_req"])
        names = [labels.get(c["server"], c["server"]) for c in cells]
        vals = [c["median"]["cpu_us_per_req"] for c in cells]
        err = [
            [v - (c["cpu_ci"] or [v, v])[0] for v, c in zip(vals, cells, strict=True)],
            [(c["cpu_ci"] or [v, v])[1] - v for v, c in zip(vals, cells, strict=True)],
        ]
        colors = ["#dd8452" if c["server"] == tls_lanes.REFERENCE else "#4c72b0" for c in cells]
        ax.barh(names, vals, xerr=err, color=colors, capsize=3)
        ax.set_title(f"{mode}: server CPU µs per request", fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("µs (median, 95% interval)")
    made.append(save_chart(plt, fig, d, "cpu_per_request"))
    servers = res.get("servers", [])
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(servers) + 1.5))
    plain = plaintext_idle()
    width = 0.27
    for i, (key, color) in enumerate(
        (("https", "#4c72b0"), ("h2", "#dd8452"), ("plaintext", "#55a868"))
    ):
        ys, xs = [], []
        for j, s in enumerate(servers):
            if key == "plaintext":
                v = plain.get(PLAINTEXT_PEER.get(s["name"], ""))
            else:
                v = ((s.get("idle_memory") or {}).get(key) or {}).get("per_connection_bytes")
            if v is not None:
                ys.append(j + (i - 1) * width)
                xs.append(v / 1024)
        ax.barh(ys, xs, height=width, color=color, label=key)
    ax.set_yticks(range(len(servers)), [labels.get(s["name"], s["name"]) for s in servers])
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("KiB per idle connection")
    ax.legend(fontsize=8)
    made.append(save_chart(plt, fig, d, "idle_memory"))
    return made


def write(res: dict, out_dir: Path) -> tuple[Path, list[Path]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.md"
    path.write_text(render(res))
    return path, charts(res, out_dir)
