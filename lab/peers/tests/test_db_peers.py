"""Every built peer that lists `db_scenarios` answers the database scenarios validly
(lab/peregrine_lab/db_parity.py) against a real PostgreSQL started by the lab's database module,
with WORKERS=1 and WORKERS=2 (per-worker pools), and registers no database route without
DATABASE_URL. Unbuilt peers are skipped (`./scripts/lab build` builds them; scripts/test does, and
fails on any skip); no PostgreSQL → skipped.

Run: python3 -m pytest lab/peers/tests/test_db_peers.py -q
"""

import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parent.parent
LAB = PEERS.parent
sys.path.insert(0, str(LAB))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from peregrine_lab import database, db_parity, parity  # noqa: E402
from peregrine_lab.peers import load_contract, load_peers  # noqa: E402
from test_peers import Server  # noqa: E402

CONTRACT = load_contract(LAB / "contract" / "db.json")
DB_PEERS = [p for p in load_peers(PEERS / "peers.toml") if p.extra.get("db_scenarios")]

pytestmark = pytest.mark.skipif(not database.available(), reason="PostgreSQL not installed")


def built(peer) -> bool:
    exe = peer.dir / peer.run[0]
    if peer.run[0] == "node":
        return (peer.dir / "node_modules").is_dir()
    return exe.is_file()


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    with database.Database(tmp_path_factory.mktemp("pg")) as db:
        yield db


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("peer", DB_PEERS, ids=lambda p: p.name)
def test_peer_serves_the_database_scenarios_validly(pg, peer, workers):
    if not built(peer):
        pytest.skip(f"{peer.name} is not built: ./scripts/lab build --servers {peer.name} "
                    "(scripts/test builds every peer these tests start)")
    env = {**peer.env, "DATABASE_URL": pg.url, "DB_POOL": "4"}
    server = Server(peer.run, peer.dir, workers=workers, env=env)
    try:
        problems = {
            s: db_parity.check(
                "127.0.0.1", server.port, CONTRACT.by_name(s), CONTRACT.required_headers, pg, 20
            ).problems
            for s in peer.extra["db_scenarios"]
        }
    finally:
        server.stop()
    assert problems == {s: [] for s in peer.extra["db_scenarios"]}


@pytest.mark.parametrize("peer", DB_PEERS, ids=lambda p: p.name)
def test_no_database_route_without_database_url(peer, monkeypatch):
    if not built(peer):
        pytest.skip(f"{peer.name} is not built: ./scripts/lab build --servers {peer.name} "
                    "(scripts/test builds every peer these tests start)")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    server = Server(peer.run, peer.dir, workers=1, env=dict(peer.env))
    try:
        (resp,) = parity.exchange("127.0.0.1", server.port, CONTRACT.by_name("db"), count=1)
    finally:
        server.stop()
    assert resp.status == 404
