"""Profile one server on one database scenario, pinned as the lab pins it.

PostgreSQL (the lab's database module) and wrk on CPU 0, the server on CPU 1 with WORKERS=1 and
DB_POOL=8; wrk -c50 for 9 s, `perf record -g` of the server for 5 s from second 2.

    python3 lab/experiments/db_perf.py NAME PATH CMD...
    python3 lab/experiments/db_perf.py peregrine /fortunes target/release/examples/scenarios
    perf report -i /tmp/perf-peregrine.data --no-children --sort dso,sym -g none
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from peregrine_lab import database, procs  # noqa: E402

PORT = 18557


def main() -> None:
    name, path, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
    with database.Database(Path(tempfile.mkdtemp(prefix="db-perf-")), cpus="0") as db:
        env = dict(os.environ, DATABASE_URL=db.url, DB_POOL="8", ADDR=f"127.0.0.1:{PORT}")
        env["WORKERS"] = "1"
        p = subprocess.Popen(["taskset", "-c", "1", *cmd], env=env, start_new_session=True)
        try:
            procs.wait_for_port("127.0.0.1", PORT, p, 30)
            url = f"http://127.0.0.1:{PORT}{path}"
            wrk = subprocess.Popen(
                ["taskset", "-c", "0", "wrk", "-t1", "-c50", "-d9", url],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(2)
            out = f"/tmp/perf-{name}.data"
            perf = ["perf", "record", "-q", "-F", "999", "-g", "-o", out, "-p", str(p.pid)]
            subprocess.run([*perf, "--", "sleep", "5"], check=False)
            print(next(x for x in wrk.communicate()[0].splitlines() if "Requests/sec" in x))
            print(f"profile: {out}")
        finally:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


if __name__ == "__main__":
    main()
