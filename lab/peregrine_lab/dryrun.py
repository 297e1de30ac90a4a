"""`--dry-run`: what a run would do (servers, cells, runs, time), printed without building,
starting or measuring anything."""

from __future__ import annotations

from collections import Counter

from .checks import fixed_port
from .results import toolchain_line


def describe(prof, peers, planned, estimate: float, seed: int, stream, tools: dict) -> None:
    """Print the plan of a run: `planned` are the runner's cells, `estimate` its measuring
    seconds (builds excluded: they depend on what is already built), `tools` the versions the
    run would record now (results.tool_versions), so a missing tool shows before measuring."""
    cells = Counter(pl.peer.name for pl in planned)
    runs = Counter()
    for pl in planned:
        runs[pl.peer.name] += len(pl.rates) if pl.mode == "open" else pl.runs
    print(
        f"dry run of profile {prof.name} (seed {seed}): nothing is built or measured", file=stream
    )
    for p in peers:
        how = " && ".join(" ".join(c) for c in p.build) or "nothing to build"
        if fixed_port(p) is not None:
            how += f"; always on port {fixed_port(p)}"
        print(
            f"  {p.name:24} {cells[p.name]:4} cell(s) {runs[p.name]:5} run(s)  build: {how}",
            file=stream,
        )
    shapes = sorted({(pl.scen.name, pl.c, pl.p, pl.mode) for pl in planned})
    print(f"cells ({len(shapes)} shapes, {len(planned)} in all):", file=stream)
    for scen, c, p, mode in shapes:
        print(f"  {scen} c={c} pipeline={p} {mode}", file=stream)
    # node and bun are the Node peers' own (their `npm ci`): "?" until those are built.
    print(f"versions: {toolchain_line(tools)}", file=stream)
    print(
        f"estimated measuring time {estimate / 60:.1f} min ({estimate:.0f} s), plus the builds "
        "of anything not yet built",
        file=stream,
    )
