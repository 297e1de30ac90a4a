"""Summary of a floor-variants run (variants.sh cpu): per lane, each server's median server CPU µs
per request (user + kernel) and its ratio to a reference server, the geometric mean of the
per-round ratios with the lab's paired t 95% interval (peregrine_lab.stats), lowest first.

usage: python3 variants_summary.py RESULTS_JSON [REFERENCE]   (default reference: floor)
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from peregrine_lab.stats import paired_log_ratio  # noqa: E402


def main(path, reference="floor"):
    cells = json.loads(Path(path).read_text())["cells"]
    lanes = sorted({(c["concurrency"], c["pipeline"]) for c in cells}, key=lambda k: (k[1], k[0]))
    print("| lane | server | CPU µs/request (median) | ratio to " + reference + " [95%] | rounds |")
    print("|---|---|---:|---:|---:|")
    for conc, pipe in lanes:
        per = {
            c["server"]: {r["round"]: r["cpu_us_per_req"] for r in c["runs"] if r.get("round")}
            for c in cells
            if (c["concurrency"], c["pipeline"]) == (conc, pipe)
        }
        ref = per.get(reference, {})
        rows = []
        for server, runs in per.items():
            pairs = [(v, ref[k]) for k, v in runs.items() if k in ref]
            est = paired_log_ratio(pairs)
            text = "–" if server == reference or est is None else f"{est[0]:.3f}"
            if est and est[1] and server != reference:
                text += f" [{est[1][0]:.3f}–{est[1][1]:.3f}]"
            rows.append((statistics.median(runs.values()), server, text, len(pairs)))
        lane = f"c={conc}" if pipe == 0 else f"{conc} × {pipe}"
        for med, server, text, n in sorted(rows):
            print(f"| {lane} | {server} | {med:.4f} | {text} | {n} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
