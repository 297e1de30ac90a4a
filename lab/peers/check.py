#!/usr/bin/env python3
"""Contract check of one running peer, for whoever writes or edits a peer.

Usage: check.py HOST:PORT [scenario ...]   (default: every scenario in ../contract/scenarios.json)
       check.py HOST:PORT --peer NAME       (the scenarios NAME lists in peers.toml)

Runs the lab runner's own parity check (`lab/peregrine_lab/parity.py`: status, Content-Type
prefix, body as bytes or JSON, required/exact/absent headers, Server and Date, framing, keep-alive)
against a server started by hand, so a peer that passes here passes the lab's check. Exits 1 if
any scenario mismatches.
"""

import sys
import tomllib
from pathlib import Path

LAB = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(LAB))

from peregrine_lab import parity  # noqa: E402
from peregrine_lab.peers import load_contract  # noqa: E402


def problems(host: str, port: int, names=None) -> dict[str, list[str]]:
    """The parity problems of each scenario (all, or those in `names`); empty lists mean ok."""
    contract = load_contract()
    return {
        sc.name: parity.check(host, port, sc, contract.required_headers).problems
        for sc in contract.scenarios
        if not names or sc.name in names
    }


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    wanted = sys.argv[2:]
    if wanted[:1] == ["--peer"] and len(wanted) == 2:
        registry = tomllib.loads((LAB / "peers" / "peers.toml").read_text())
        peers = {p["name"]: p for p in registry["peer"]}
        if wanted[1] not in peers:
            sys.exit(f"no peer {wanted[1]!r} in peers.toml")
        wanted = peers[wanted[1]]["scenarios"]
    found = problems(host, int(port), wanted)
    for name, probs in found.items():
        print(f"{'ok  ' if not probs else 'FAIL'} {name:<11} {'; '.join(probs)}")
    sys.exit(1 if any(found.values()) else 0)


if __name__ == "__main__":
    main()
