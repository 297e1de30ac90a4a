"""Command line: `./scripts/lab PROFILE [options]` measures; `./scripts/lab report DIR`
regenerates the report and charts from DIR/results.json; `./scripts/lab build` only builds."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from . import before, build, config, loadgen, procs, report, results, runner, tls_lanes
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
        prog="./scripts/lab",
        description="Measure Peregrine and its peers side by side, or regenerate a report.",
        epilog="profiles: "
        + "; ".join(f"{k}: {v.description}" for k, v in config.PROFILES.items())
        + f"; protocols: {tls_lanes.PROFILE.description}"
        + "; soak: the scenarios app under mixed load for --duration (default 1800 s), RSS, "
        "descriptors, CPU, latency and errors sampled, budgets checked (docs/operations.md)",
    )
    p.add_argument(
        "what",
        choices=list(config.PROFILES) + ["protocols", "soak", "report", "figures", "list", "build"],
        help="a profile to run, `report DIR` to regenerate a report, `figures` to regenerate the "
        "figures quoted in README.md and docs/*.md, `list`, or `build` (the servers' build "
        "commands, nothing measured)",
    )
    p.add_argument("dir", nargs="?", help="for `report`: the folder holding results.json")
    p.add_argument("--servers", type=_names, help="comma-separated server names (peers.toml)")
    p.add_argument("--scenarios", type=_names, help="comma-separated scenario names (contract)")
    p.add_argument("--concurrency", type=_ints, help='connection counts, e.g. "1 10 50 200"')
    p.add_argument("--pipeline", type=_ints, help='pipelining depths, e.g. "0 16 256"')
    p.add_argument("--runs", type=int, help="timed runs per cell")
    p.add_argument("--duration", type=float, help="seconds per run (wrk: whole seconds)")
    p.add_argument("--server-cpus", help="CPUs for the servers (taskset list, e.g. 1 or 2-3)")
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
        "lab/peers/protocols.toml)",
    )
    p.add_argument("--skip-build", action="store_true", help="use what is already built")
    p.add_argument(
        "--before-ref",
        default=before.DEFAULT_REF,
        help=f'git ref {before.NAME} (the engine profile\'s "before") is built from '
        f"(default {before.DEFAULT_REF[:7]}: the last commit on main dated 2026-11-22)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    command = os.environ.get("PEREGRINE_LAB_COMMAND") or "./scripts/lab " + " ".join(
        shlex.quote(a) for a in (argv or sys.argv[1:])
    )

    if args.what == "report":
        if not args.dir:
            print("usage: ./scripts/lab report DIR", file=sys.stderr)
            return 2
        try:
            res = results.load(Path(args.dir))
        except (OSError, ValueError) as e:
            print(f"cannot read results from {args.dir}: {e}", file=sys.stderr)
            return 1
        return _write_outputs(res, Path(args.dir))

    if args.what == "figures":
        from . import figures

        return figures.main([])

    if args.what == "protocols":
        return _protocols(args, command)

    if args.what == "soak":
        from . import soak

        return soak.main(args, command)

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
    )
    try:
        res = runner.run(opts)
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
    """`./scripts/lab protocols`: the HTTPS and HTTP/2 lanes (tls_lanes.py)."""
    try:
        split = config.cpu_split(args.server_cpus, args.client_cpus)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = args.out or (config.LAB_DIR / "results" / "protocols")
    opts = tls_lanes.Options(
        out_dir=out,
        split=split,
        runs=args.runs or tls_lanes.PROFILE.runs,
        duration=args.duration or tls_lanes.PROFILE.duration,
        servers=args.servers,
        skip_build=args.skip_build,
        port=args.port,
        command=command,
        peers_file=args.peers or tls_lanes.PROTOCOLS_TOML,
    )
    try:
        res = tls_lanes.run(opts)
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

    if res.get("profile") == "protocols":
        from . import tls_report

        path, made = tls_report.write(res, out)
        print(f"wrote {path} and {len(made)} chart(s) in {out / 'charts'}")
        return 0
    path = report.write(res, out)
    made = charts.write_all(res, out)
    print(f"wrote {path} and {len(made)} chart(s) in {out / 'charts'}")
    return 0
