"""The lab's PostgreSQL (database.py) and the database parity (db_parity.py).

A real PostgreSQL is started (Debian's package, installed by scripts/setup); the tests are skipped
when it is missing. The parity tests run db_contract_server.py, correct or with one fault each,
against that database: every fault must be caught with a message that names it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from peregrine_lab import database, db_parity
from peregrine_lab.peers import load_contract

pytestmark = pytest.mark.skipif(not database.available(), reason="PostgreSQL not installed")

LAB = Path(__file__).resolve().parents[1]
CONTRACT = load_contract(LAB / "contract" / "db.json")
REQ = CONTRACT.required_headers


def _alive(pids):
    return [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"]


def _state(pid):
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return raw[raw.rindex(")") + 2]


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    with database.Database(tmp_path_factory.mktemp("pg"), seed=0.5) as db:
        yield db


def test_schema_and_data_are_techempowers(pg):
    count, lo, hi, distinct = pg.rows(
        "SELECT count(*), min(randomnumber), max(randomnumber), count(DISTINCT id) FROM world"
    )[0]
    assert (int(count), int(distinct)) == (10000, 10000)
    assert 1 <= int(lo) and int(hi) <= 10000
    assert pg.rows("SELECT min(id), max(id) FROM world") == [["1", "10000"]]
    fortunes = [(int(i), m) for i, m in pg.rows("SELECT id, message FROM fortune ORDER BY id")]
    assert fortunes == database.FORTUNES
    assert any("<script>" in m for _, m in fortunes) and any(
        "ベンチマーク" in m for _, m in fortunes
    )
    # The benchmark user can read and update what the scenarios need, over TCP on loopback.
    assert pg.url.startswith("postgres://benchmarkdbuser:benchmarkdbpass@127.0.0.1:")
    out = subprocess.run(
        [
            str(pg.bin / "psql"),
            "-X",
            "-A",
            "-t",
            "-d",
            pg.url,
            "-c",
            "UPDATE world SET randomnumber = randomnumber WHERE id = 1; "
            "SELECT count(*) FROM fortune",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["UPDATE", "1", "12"] or out.split()[-1] == "12"


def test_stop_ends_every_process_and_removes_the_data(tmp_path):
    db = database.Database(tmp_path)
    db.start()
    pids = db.pids()
    assert len(pids) >= 3 and db.cpu_seconds() >= 0  # postmaster + background processes
    data = db.data_dir
    assert (data / "PG_VERSION").exists() and (tmp_path / "postgres.log").exists()
    db.stop()
    assert _alive(pids) == []
    assert not data.exists()
    db.stop()  # idempotent


def test_failure_inside_the_block_still_stops_it(tmp_path):
    pids = []
    with pytest.raises(RuntimeError, match="simulated"):
        with database.Database(tmp_path) as db:
            pids = db.pids()
            raise RuntimeError("simulated failure in the middle of a lab run")
    assert pids and _alive(pids) == []
    assert db not in database._running


def test_bad_start_leaves_nothing_behind(tmp_path):
    # A port already held by another listener: postgres cannot bind and exits at start.
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    try:
        db = database.Database(tmp_path, port=s.getsockname()[1])
        with pytest.raises(database.DatabaseError, match="exited"):
            db.start()
    finally:
        s.close()
    assert db.proc is None and db not in database._running
    assert not db.data_dir.exists()


_CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {lab!r})
    from pathlib import Path
    from peregrine_lab import database
    with database.Database(Path({run!r})) as db:
        print(db.data_dir, " ".join(map(str, db.pids())), flush=True)
        {after}
    """
)


@pytest.mark.parametrize(
    "how", ["sigint", "sigterm", "exception", "sys_exit"], ids=lambda h: f"lab-{h}"
)
def test_no_postgres_left_after_the_lab_process_stops(tmp_path, how):
    after = {
        "sigint": "time.sleep(60)",
        "sigterm": "time.sleep(60)",
        "exception": "raise SystemError('boom')",
        "sys_exit": "sys.exit(3)",
    }[how]
    code = _CHILD.format(lab=str(LAB), run=str(tmp_path), after=after)
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    data, *raw = child.stdout.readline().split()
    pids = [int(p) for p in raw]
    assert pids, child.stderr.read()
    if how == "sigint":
        child.send_signal(2)
    elif how == "sigterm":
        child.terminate()
    child.wait(timeout=30)
    assert _alive(pids) == [], f"left running: {_alive(pids)}"
    assert not Path(data).exists()


# ---------------------------------------------------------------- parity


class _Server:
    def __init__(self, db, faults=()):
        import db_contract_server

        self.httpd = db_contract_server.serve(db, faults)
        self.host, self.port = self.httpd.server_address[:2]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def check(self, name, db):
        return db_parity.check(self.host, self.port, CONTRACT.by_name(name), REQ, db, timeout=20)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve(pg):
    made = []

    def make(*faults):
        s = _Server(pg, faults)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_a_correct_server_passes_every_database_scenario(serve, pg):
    srv = serve()
    for scen in CONTRACT.scenarios:
        res = srv.check(scen.name, pg)
        assert res.ok, (scen.name, res.problems)
        assert res.status == 200


@pytest.mark.parametrize(
    "fault, scenario, needle",
    [
        ("unsorted", "fortunes", "not sorted by message"),
        ("unescaped", "fortunes", "not HTML-escaped"),
        ("no_added", "fortunes", "rows differ"),
        ("no_charset", "fortunes", "charset=utf-8"),
        ("no_clamp", "queries", "GET /queries?q=501: 501 rows, expected 500"),
        ("no_clamp", "queries", "GET /queries?q=0: 0 rows, expected 1"),
        ("no_clamp", "updates", "GET /updates?q=501: 501 rows, expected 500"),
        ("nonnumeric", "queries", "GET /queries?q=foo: 0 rows, expected 1"),
        ("wrong_number", "db", "in the database"),
        ("wrong_number", "queries", "in the database"),
        ("out_of_range", "db", "id 10001 out of range"),
        ("not_written", "updates", "update not written"),
    ],
)
def test_each_database_rule_break_is_detected(serve, pg, fault, scenario, needle):
    res = serve(fault).check(scenario, pg)
    assert not res.ok
    assert any(needle in p for p in res.problems), res.problems


def test_fortune_validator_accepts_any_valid_escaping_and_layout():
    rows = sorted(database.FORTUNES + [(0, database.ADDITIONAL_FORTUNE)], key=lambda r: r[1])

    def esc(m):  # numeric entities, apostrophe left as is: both valid
        return (
            m.replace("&", "&#38;")
            .replace("<", "&#60;")
            .replace(">", "&#62;")
            .replace('"', "&#34;")
        )

    page = (
        "<!doctype html>\n<html>\n<head><title>Fortunes</title></head>\n<body>\n<table>\n"
        "<tr><th>id</th><th>message</th></tr>\n"
        + "\n".join(f"<tr>\n  <td>{i}</td>\n  <td>{esc(m)}</td>\n</tr>" for i, m in rows)
        + "\n</table>\n</body>\n</html>\n"
    )
    assert db_parity.check_fortunes(page.encode(), "text/html;charset=UTF-8") == []
    raw_amp = page.replace("&#34;", '"', 1)
    assert any(
        "not HTML-escaped" in p
        for p in db_parity.check_fortunes(raw_amp.encode(), "text/html; charset=utf-8")
    )


def test_world_validator_rules():
    assert db_parity.check_world(b'{"id":5,"randomNumber":7}', {5: 7}) == []
    assert db_parity.check_world(b'{"id":5,"randomnumber":7}', None)  # key case matters
    assert db_parity.check_world(b'{"id":"5","randomNumber":7}', None)
    assert db_parity.check_world(b'{"id":5,"randomNumber":0}', None)
    assert db_parity.check_worlds(b'[{"id":1,"randomNumber":1}]', 2, None) == ["1 rows, expected 2"]


def test_runner_wires_database_into_server_env_and_figures(tmp_path):
    assert database.server_env() == {} and database.cpu_now() is None
    db = database.start_for_run(tmp_path, None)
    try:
        env = database.server_env()
        assert env["DATABASE_URL"] == db.url and env["DB_POOL"] == str(database.POOL_TOTAL)
        c0 = database.cpu_now()
        db.query("SELECT count(*) FROM world a, world b WHERE a.id < 300 AND b.id < 300")
        figs = database.run_figures(c0, 10)
        assert figs["db_cpu_s"] >= 0 and figs["db_cpu_us_per_req"] is not None
        pids = db.pids()
    finally:
        database.stop_active()
    assert database.active() is None and database.server_env() == {}
    deadline = time.monotonic() + 5
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(pids) == []
    assert os.environ.get("DATABASE_URL") is None


# ---------------------------------------------------------------- the db profile end to end


def _db_profile():
    from peregrine_lab import config

    return config.Profile(
        name="db",
        description="db profile test",
        cells=((2, 0),),
        runs=1,
        duration=1.0,
        warmup=0.0,
        idle_connections=0,
        probe=None,
        timeout=20.0,
        database=True,
    )


def _opts(tmp_path):
    import random

    from peregrine_lab import config, procs, runner

    port = next(
        p for p in random.sample(range(20000, 32000), 200) if not procs.port_in_use("127.0.0.1", p)
    )
    return runner.Options(
        profile=_db_profile(),
        out_dir=tmp_path,
        split=config.cpu_split(),
        port=port,
        command="test",
        peers_file=LAB / "tests" / "fixtures" / "db_peers.toml",
    )


def _postgres_pids_with(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if "postgres" in cmd and marker in cmd:
                out.append(int(d.name))
    return out


@pytest.mark.skipif(__import__("shutil").which("wrk") is None, reason="wrk not installed")
def test_db_profile_runs_end_to_end_and_stops_postgres(tmp_path, monkeypatch):
    from peregrine_lab import database as dbmod
    from peregrine_lab import runner

    seen = {}
    real_stop = dbmod.stop_active

    def stop_and_note():
        if dbmod.active() is not None:
            seen["pids"] = dbmod.active().pids()  # backends of the pooled connections included
        real_stop()

    monkeypatch.setattr(runner.database, "stop_active", staticmethod(stop_and_note))
    res = runner.run(_opts(tmp_path))
    assert res["complete"] and res["database"]["world_rows"] == 10000
    assert [s["name"] for s in res["servers"]] == ["peregrine", "unsorted"]  # nodb left out
    cells = {(c["server"], c["scenario"]): c for c in res["cells"]}
    ok = cells[("peregrine", "fortunes")]
    assert ok["status"] == "ok", ok["message"]
    run = ok["runs"][0]
    assert run["requests"] > 0 and run["db_cpu_us_per_req"] > 0 and run["cpu_us_per_req"] > 0
    assert ok["median"]["db_cpu_us_per_req"] > 0
    assert cells[("peregrine", "db")]["status"] == "ok"
    assert cells[("unsorted", "fortunes")]["status"] == "parity-failed"
    assert "not sorted" in cells[("unsorted", "fortunes")]["message"]
    assert (tmp_path / "logs" / "postgres.log").exists()
    assert len(seen["pids"]) >= 3 and _alive(seen["pids"]) == []
    assert dbmod.active() is None


def test_db_profile_stops_postgres_when_the_run_fails(tmp_path, monkeypatch):
    from peregrine_lab import checks, runner
    from peregrine_lab.database import active

    seen = {}

    def boom(opts, peer, *a, **k):
        seen["pids"] = active().pids()
        raise RuntimeError("simulated failure while measuring")

    monkeypatch.setattr(checks, "check_server", boom)
    with pytest.raises(RuntimeError, match="simulated"):
        runner.run(_opts(tmp_path))
    assert len(seen["pids"]) >= 3
    assert _alive(seen["pids"]) == [] and active() is None


def test_report_section_and_targets():
    from peregrine_lab import db_report

    def cell(server, scen, c, rps, cpu):
        med = {"rps": rps, "p50_us": 900.0, "p99_us": 4000.0, "cpu_us_per_req": cpu}
        med["db_cpu_us_per_req"] = 50.0
        return dict(
            server=server, scenario=scen, concurrency=c, pipeline=0, status="ok", median=med
        )

    res = {
        "database": {"version": "15", "cpus": "0", "pool_total": 8, "settings": {}},
        "servers": [
            {"name": "peregrine", "label": "Peregrine", "language": "Rust"},
            {"name": "axum", "label": "Rust axum", "language": "Rust"},
            {"name": "go", "label": "Go", "language": "Go"},
        ],
        "scenarios": [{"name": "db"}, {"name": "fortunes"}],
        "cells": [
            cell("peregrine", "db", 50, 10000, 40),
            cell("axum", "db", 50, 9000, 45),
            cell("go", "db", 50, 11000, 60),
            cell("peregrine", "fortunes", 50, 8000, 50),
            cell("axum", "fortunes", 50, 7000, 49),
            cell("go", "fortunes", 50, 6000, 70),
        ],
    }
    t = {(x["scenario"], x["figure"]): x for x in db_report.targets(res)}
    assert t[("db", "requests/s")]["first_among_rust"] and t[("db", "requests/s")][
        "not_beaten"
    ] == ["go"]
    assert t[("db", "server CPU µs/request")]["ahead_of_all"]
    assert t[("fortunes", "server CPU µs/request")]["not_beaten"] == ["axum"]
    text = "\n".join(db_report.section(res))
    assert "### `fortunes`" in text and "| Peregrine | 10,000 | 0.90 / 4.00 | 40.0 | 50.0 |" in text
    assert db_report.section({"servers": []}) == []


def test_cpu_time_keeps_what_closed_connections_used(pg):
    # Each psql call is a connection whose backend exits: its CPU must not vanish from the sum.
    before = pg.cpu_seconds()
    for _ in range(3):
        pg.query("SELECT count(*) FROM world a, world b WHERE a.id < 1500 AND b.id < 1500")
    after = pg.cpu_seconds()
    assert after > before


def test_peregrine_against_the_best_other_server_per_test():
    """Each test's best other server is the one with the least server CPU per request, never a
    Peregrine build; the ratio is paired by round, and "first" needs the whole interval below 1."""
    from peregrine_lab import db_report

    def cell(server, scen, pipe, cpus):
        runs = [
            {"round": k, "cpu_us_per_req": v, "rps": 1000.0, "status": "ok"}
            for k, v in enumerate(cpus)
        ]
        med = {"cpu_us_per_req": sorted(cpus)[len(cpus) // 2], "rps": 1000.0}
        return dict(
            server=server,
            scenario=scen,
            concurrency=256,
            pipeline=pipe,
            mode="keep-alive",
            status="ok",
            median=med,
            runs=runs,
        )

    res = {
        "database": {"version": "15", "cpus": "0", "pool_total": 8, "settings": {}},
        "servers": [
            {"name": "peregrine", "label": "Peregrine", "language": "Rust"},
            {"name": "peregrine-mimalloc", "label": "Peregrine (mimalloc)", "language": "Rust"},
            {"name": "ntex", "label": "ntex", "language": "Rust"},
            {"name": "may", "label": "may", "language": "Rust"},
        ],
        "scenarios": [{"name": "plaintext"}, {"name": "db"}],
        "cells": [
            cell("peregrine", "plaintext", 16, [0.50, 0.51, 0.49]),
            cell("peregrine-mimalloc", "plaintext", 16, [0.40, 0.41, 0.39]),
            cell("ntex", "plaintext", 16, [0.90, 0.91, 0.89]),
            cell("may", "plaintext", 16, [0.60, 0.61, 0.59]),
            cell("peregrine", "db", 0, [20.0, 21.0, 19.0]),
            cell("ntex", "db", 0, [16.0, 16.5, 15.5]),
            cell("may", "db", 0, [30.0, 31.0, 29.0]),
        ],
    }
    rows = {(r["scenario"], r["reference"]): r for r in db_report.versus_best(res)}
    # The mimalloc build is Peregrine's own: never the best other, compared on its own row.
    assert rows[("plaintext", "peregrine")]["best_other"] == "may"
    assert rows[("plaintext", "peregrine-mimalloc")]["best_other"] == "may"
    assert rows[("plaintext", "peregrine")]["ratio"] == pytest.approx(0.5 / 0.6, rel=0.02)
    assert rows[("db", "peregrine")]["best_other"] == "ntex"
    assert ("db", "peregrine-mimalloc") not in rows  # it did not run that test
    text = "\n".join(db_report.section(res))
    assert "### Peregrine against the best other server, per test" in text
    assert "| `plaintext` c=256 × 16 | Peregrine | 0.50 | may | 0.60 |" in text
    db_line = next(x for x in text.splitlines() if x.startswith("| `db` c=256 | Peregrine |"))
    assert db_line.endswith("| **no** |"), db_line
    plain_line = next(
        x for x in text.splitlines() if x.startswith("| `plaintext` c=256 × 16 | Peregrine |")
    )
    assert plain_line.endswith("| yes |"), plain_line
