"""Command line (`./scripts/lab` or the `peregrine-lab` console script): `PROFILE [options]`
measures; `report DIR` regenerates the report and charts from DIR/results.json; `build` only
builds; `compare A B` and `export DIR --csv OUT` read result folders (tables.py)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from . import (
    __version__,
    before,
    build,
    config,
    loadgen,
    outside,
    procs,
    report,
    results,
    runner,
    tables,
    tls_lanes,
)
from .peers import RegistryError


def _ints(text: str) -> list[int]:
    try:
        vals = [int(x) for x in text.replace(",", " ").split()]
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from e
    if not vals or any(v < 0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return vals


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=os.path.basename(sys.argv[0]) if "peregrine-lab" in sys.argv[0] else "./scripts/lab",
        description="Measure Peregrine and its peers side by side, or regenerate a report.",
        epilog="profiles: "
        + "; ".join(f"{k}: {v.description}" for k, v in config.PROFILES.items())
        + f"; protocols: {tls_lanes.PROFILE.description}"
        + "; h3: HTTP/3 against HTTP/2 and HTTPS on the same app (h3_lane.py)"
        + "; soak: the scenarios app under mixed load for --duration (default 1800 s), RSS, "
        "descriptors, CPU, latency and errors sampled, budgets checked (docs/operations.md)"
        "; restart: rolling restarts of the scenarios app under load for --duration (default "
        "120 s), the listener handed over: failed and duplicated requests counted"
        "; seeds: the five seeds' own experiments, Peregrine in each table (--only NAME,...)",
    )
    p.add_argument(
        "what",
        choices=list(config.PROFILES)
        + [
            "protocols",
            "h3",
            "soak",
            "restart",
            "seeds",
            "report",
            "figures",
            "list",
            "build",
            "compare",
            "export",
        ],
        help="a profile to run, `report DIR` to regenerate a report, `figures` to regenerate "
        "the figures quoted in README.md and docs/*.md, `list`, `build` (the "
        "servers' build commands, nothing measured), `compare A B` (ratios B/A of two result "
        "folders), `export DIR --csv OUT`",
    )
    p.add_argument(
        "dir", nargs="*", help="report/export: the folder holding results.json; compare: A B"
    )
    p.add_argument("--version", action=_Version, help="the lab's version and git commit")
    p.add_argument(
        "--server",
        action="append",
        metavar="'NAME=COMMAND[;port=N][;scenarios=a,b][;ready=/path][;label=TEXT]'",
        help="also measure this server, started by COMMAND, which gets its port from {port}, "
        "{addr}, $PORT or $ADDR (or always listens on port=N); repeatable (lab/README.md, "
        '"Your own server")',
    )
    p.add_argument("--seed", type=int, help="the run's seed (round order; default: drawn)")
    p.add_argument(
        "--dry-run", action="store_true", help="print the plan and estimated time; measure nothing"
    )
    p.add_argument("--csv", type=Path, help="export: the folder the CSV files are written to")
    p.add_argument("--md", type=Path, help="compare: also write the table to this file")
    p.add_argument(
        "--only",
        type=_names,
        help="seeds: nurl, rust-http, kourier, nextrush, lemire (default all)",
    )
    p.add_argument("--servers", type=_names, help="comma-separated server names (peers.toml)")
    p.add_argument("--scenarios", type=_names, help="comma-separated scenario names (contract)")
    p.add_argument("--concurrency", type=_ints, help='connection counts, e.g. "1 10 50 200"')
    p.add_argument("--pipeline", type=_ints, help='pipelining depths, e.g. "0 16 256"')
    p.add_argument("--runs", type=int, help="timed runs per cell")
    p.add_argument("--duration", type=float, help="seconds per run (wrk: whole seconds)")
    p.add_argument("--server-cpus", help="CPUs for the servers (taskset list, e.g. 1 or 2-3)")
    p.add_argument(
        "--load-fraction",
        type=float,
        help="soak: how busy the busiest CPUs (client or server) run under the steady load "
        "(default 0.7)",
    )
    p.add_argument("--client-cpus", help="CPUs for the load generator")
    p.add_argument(
        "--loadgen",
        choices=list(loadgen.LOADGENS),
        default="wrk",
        help="closed-loop load generator (the open-loop lane always uses oha)",
    )
    p.add_argument(
        "--port",
        type=int,
        default=None,
        help="port the servers listen on (default: the first free one from 28080; an explicit "
        "port that is busy is an error)",
    )
    p.add_argument(
        "--out",
        type=Path,
        help="output folder (default lab/results/PROFILE; for `build`, its logs: lab/.build/logs)",
    )
    p.add_argument("--reference", default="peregrine", help="server the ratios are taken to")
    p.add_argument(
        "--peers",
        type=Path,
        default=None,
        help="peers registry to use (default lab/peers/peers.toml; protocols: "
        "lab/peers/protocols.toml; h3: lab/peers/h3.toml)",
    )
    p.add_argument("--skip-build", action="store_true", help="use what is already built")
    p.add_argument(
        "--before-ref",
        default=before.DEFAULT_REF,
        help=f'git ref {before.NAME} (the engine profile\'s "before") is built from '
        f"(default {before.DEFAULT_REF[:7]}: the last commit on main dated 2026-11-22)",
    )
    return p


class _Version(argparse.Action):
    """--version: the lab's version and the commit it runs from (git asked only then)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        git = results.git_info()
        commit = f"git {git['commit'][:12]}" if git["commit"] else "git commit unknown"
        dirty = ", uncommitted changes" if git["dirty"] else ""
        print(f"peregrine-lab {__version__} ({commit}{dirty})")
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = os.environ.get("PEREGRINE_LAB_COMMAND") or "./scripts/lab " + " ".join(
        shlex.quote(a) for a in (argv or sys.argv[1:])
    )

    if args.what in ("compare", "export"):
        return tables.main(args)
    if args.what == "report":
        if len(args.dir) != 1:
            print("usage: ./scripts/lab report DIR", file=sys.stderr)
            return 2
        try:
            res = results.load(Path(args.dir[0]))
        except (OSError, ValueError) as e:
            print(f"cannot read results from {args.dir[0]}: {e}", file=sys.stderr)
            return 1
        return _write_outputs(res, Path(args.dir[0]))
    if args.dir:
        print(f"error: {args.what} takes no folder ({' '.join(args.dir)})", file=sys.stderr)
        return 2

    dry_runs = (*config.PROFILES, "h3")  # the h3 lane prints its own plan (h3_lane.describe)
    if (args.server and args.what not in config.PROFILES) or (
        args.dry_run and args.what not in dry_runs
    ):
        print(
            f"error: --server and --dry-run apply to a measuring profile "
            f"({', '.join(config.PROFILES)}; --dry-run also to h3), not to {args.what}",
            file=sys.stderr,
        )
        return 2

    if args.what == "figures":
        from . import figures

        return figures.main([])

    if args.what in ("protocols", "h3"):
        return _protocols(args, command)

    if args.what == "soak":
        from . import soak

        return soak.main(args, command)

    if args.what == "seeds":
        from .seeds import run as seeds_run

        return seeds_run.main(args, command)

    if args.what == "restart":
        from . import restart

        return restart.main(args, command)

    if args.what == "build":
        return _build(args)

    if args.what == "list":
        from .peers import load_contract, load_peers

        try:
            for p in load_peers(args.peers or config.PEERS_TOML):
                print(f"{p.name:18} {p.kind:7} {p.label}  [{', '.join(p.scenarios)}]")
            print(
                f"{before.NAME} (made by the lab) the hello example built from --before-ref "
                f"(default {before.DEFAULT_REF[:7]})  [plaintext]"
            )
            print()
            for s in load_contract().scenarios:
                print(f"{s.name:12} {'main' if s.main else '    '} {s.method} {s.path}")
        except RegistryError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        return 0

    prof = config.with_overrides(
        config.PROFILES[args.what],
        concurrency=args.concurrency,
        pipeline=args.pipeline,
        runs=args.runs,
        duration=args.duration,
        servers=args.servers,
        scenarios=args.scenarios,
    )
    if prof.runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    try:
        split = config.cpu_split(args.server_cpus, args.client_cpus)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or (config.LAB_DIR / "results" / prof.name)
    try:
        mine = _outside(args, prof)
    except RegistryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    opts = runner.Options(
        profile=prof,
        out_dir=out,
        split=split,
        loadgen=args.loadgen,
        port=args.port,
        skip_build=args.skip_build,
        reference=args.reference,
        command=command,
        peers_file=args.peers or config.PEERS_TOML,
        before_ref=args.before_ref,
        seed=args.seed,
        dry_run=args.dry_run,
        outside=mine,
    )
    try:
        res = runner.run(opts)
        if res is None:  # --dry-run
            return 0
    except (runner.LabError, RegistryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        procs.kill_all()
        print("\ninterrupted: every server stopped", file=sys.stderr)
        partial = out / "results.json"
        if partial.exists():
            _write_outputs(results.load(partial), out)
            print(f"partial results kept in {out}", file=sys.stderr)
        return 130
    rc = _write_outputs(res, out)
    print(
        f"done in {res['wall_seconds']:.0f} s ({res['measuring_seconds']:.0f} s measuring, "
        f"{res['planned_measuring_seconds']} s planned): {out / 'results.json'}, "
        f"{out / 'report.md'}, {out / 'charts'}/"
    )
    return rc


def _outside(args, prof: config.Profile):
    """The --server peers, checked against the registry's names and the run's contract."""
    from .database import profile_contract
    from .peers import load_peers

    if not args.server:
        return []
    known = {p.name for p in load_peers(args.peers or config.PEERS_TOML)} | {before.NAME}
    contract = profile_contract(prof)
    return outside.parse_all(args.server, known, contract.names())


def _build(args) -> int:
    """`./scripts/lab build`: the build commands of the named servers (default: every one of the
    registry), exactly as a profile runs them. A server not built fails the command, one that
    lacks its toolchain too: whoever asks for a build (scripts/test) needs the binary."""
    from .peers import load_peers, select_peers

    try:
        peers = select_peers(load_peers(args.peers or config.PEERS_TOML), args.servers)
    except RegistryError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    done = build.build_all(peers, args.out or config.LAB_DIR / ".build" / "logs")
    failed = [name for name, b in done.items() if not b.ok]
    seconds = sum(b.seconds for b in done.values())
    if failed:
        print(f"error: not built: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"built {len(done)} server(s) in {seconds:.0f} s")
    return 0


def _protocols(args, command: str) -> int:
    """`./scripts/lab protocols`: the HTTPS and HTTP/2 lanes (tls_lanes.py); `h3`: the HTTP/3
    lane (h3_lane.py) on the same machinery."""
    from . import h3_lane

    h3 = args.what == "h3"
    lanes = h3_lane if h3 else tls_lanes
    try:
        split = config.cpu_split(args.server_cpus, args.client_cpus)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or (config.LAB_DIR / "results" / args.what)
    opts = tls_lanes.Options(
        out_dir=out,
        split=split,
        runs=args.runs or lanes.PROFILE.runs,
        duration=args.duration or lanes.PROFILE.duration,
        servers=args.servers,
        skip_build=args.skip_build,
        port=args.port,
        command=command,
        peers_file=args.peers or (h3_lane.H3_TOML if h3 else tls_lanes.PROTOCOLS_TOML),
        seed=args.seed,
    )
    if args.dry_run:
        h3_lane.describe(opts)
        return 0
    try:
        res = lanes.run(opts)
    except (tls_lanes.ProtocolsError, RegistryError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        procs.kill_all()
        print("\ninterrupted: every server stopped", file=sys.stderr)
        return 130
    rc = _write_outputs(res, out)
    print(f"done in {res['wall_seconds']:.0f} s: {out / 'results.json'}, {out / 'report.md'}")
    return rc


def _write_outputs(res: dict, out: Path) -> int:
    from . import charts

    if res.get("profile") == "seeds":
        from .seeds import tables

        print(f"wrote {tables.write(res, out)}")
        return 0
    if res.get("profile") in ("soak", "restart"):
        # report.md only: the soak chart stays as its run drew it.
        from . import restart_report, soak_report

        make = soak_report if res["profile"] == "soak" else restart_report
        (out / "report.md").write_text(make.markdown(res))
        print(f"wrote {out / 'report.md'}")
        return 0
    if res.get("profile") in ("protocols", "h3"):
        from . import h3_report, tls_report

        path, made = (h3_report if res["profile"] == "h3" else tls_report).write(res, out)
        print(f"wrote {path} and {len(made)} chart(s) in {out / 'charts'}")
        return 0
    path = report.write(res, out)
    made = charts.write_all(res, out)
    print(f"wrote {path} and {len(made)} chart(s) in {out / 'charts'}")
    return 0
