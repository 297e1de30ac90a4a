"""Server-side figures read from /proc: CPU time and memory of a server's whole process tree, and
memory per idle keep-alive connection.

A multi-process server (nginx master + workers, a Node cluster) is measured as the sum over its
tree: the leader, every descendant, and every member of its process group (which catches a
child that was re-parented after a double fork).
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import parity

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat from field 3 (state) on; None when the process is gone. The
    command name (field 2) may hold spaces and parentheses, so split after its last ')'."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rindex(")") + 2 :].split()


def process_tree(pid: int) -> list[int]:
    """`pid`, its descendants and the members of its process group, sorted."""
    parent: dict[int, int] = {}
    group: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        f = _stat_fields(int(entry.name))
        if f is None:
            continue
        parent[int(entry.name)] = int(f[1])  # field 4: ppid
        group[int(entry.name)] = int(f[2])  # field 5: pgrp
    if pid not in parent:
        return []
    found = {pid}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for child, pp in parent.items():
            if pp == p and child not in found:
                found.add(child)
                frontier.append(child)
    found.update(p for p, g in group.items() if g == pid)
    return sorted(found)


def cpu_ticks_by_pid(pids: list[int]) -> dict[int, float]:
    """utime + stime (fields 14 and 15) of each live process, in seconds (10 ms ticks).

    The process-level /proc/PID/stat holds the sum over every thread of the process, including
    threads that already exited; kept as a cross-check of `cpu_by_pid`."""
    out = {}
    for pid in pids:
        f = _stat_fields(pid)
        if f is not None:
            out[pid] = (int(f[11]) + int(f[12])) / CLK_TCK
    return out


def _task_runtime_ns(pid: int) -> int | None:
    """Time on CPU of every live thread of `pid`, in nanoseconds: the first field of each
    /proc/PID/task/TID/schedstat (the scheduler's sum_exec_runtime). A thread that exits takes
    its time with it; the server threads of every peer live as long as the server."""
    try:
        tids = os.listdir(PROC / str(pid) / "task")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    total = 0
    for tid in tids:
        try:
            total += int((PROC / str(pid) / "task" / tid / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError, ValueError):
            continue
    return total


def cpu_by_pid(pids: list[int]) -> dict[int, float]:
    """Time on CPU of each live process, in seconds, with nanosecond resolution (schedstat,
    see `_task_runtime_ns`); the 10 ms tick counts of /proc/PID/stat when schedstat is missing."""
    out = {}
    for pid in pids:
        ns = _task_runtime_ns(pid) if SCHEDSTAT else None
        if ns is not None:
            out[pid] = ns / 1e9
        else:
            ticks = cpu_ticks_by_pid([pid])
            if pid in ticks:
                out[pid] = ticks[pid]
    return out


SCHEDSTAT = (PROC / "self" / "schedstat").exists()


def cpu_time_source() -> dict:
    """How server CPU time is measured, and whether the kernel charges interrupt time to the
    interrupted task (without IRQ time accounting, softirq work done for the loopback stack while
    a server thread runs counts as that thread's time)."""
    irq = None
    release = os.uname().release
    for cfg in (Path(f"/boot/config-{release}"), PROC / "config.gz"):
        try:
            if cfg.suffix == ".gz":
                import gzip

                text = gzip.decompress(cfg.read_bytes()).decode()
            else:
                text = cfg.read_text()
        except OSError:
            continue
        irq = "CONFIG_IRQ_TIME_ACCOUNTING=y" in text
        break
    return {
        "source": "schedstat (ns, per thread)" if SCHEDSTAT else "/proc/PID/stat (10 ms ticks)",
        "irq_time_accounting": irq,
        "irq_time_accounting_note": (
            "kernel config not readable here: unknown" if irq is None else ""
        ),
    }


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds (user + system) summed over the processes."""
    return sum(cpu_by_pid(pids).values())


def _status_kib(pid: int, key: str) -> int | None:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def rss_bytes(pids: list[int]) -> int:
    """Current resident set (VmRSS) summed over the processes, in bytes."""
    return sum((_status_kib(p, "VmRSS") or 0) for p in pids) * 1024


def peak_rss_bytes(pids: list[int]) -> int:
    """Peak resident set (VmHWM) summed over the processes, in bytes."""
    return sum((_status_kib(p, "VmHWM") or 0) for p in pids) * 1024


def reset_peak_rss(pids: list[int]) -> bool:
    """Reset VmHWM to the current RSS (writing 5 to /proc/PID/clear_refs, Linux >= 4.0), so the
    peak read after a cell is the peak of that cell. False if the kernel refused."""
    ok = True
    for p in pids:
        try:
            (PROC / str(p) / "clear_refs").write_text("5")
        except OSError:
            ok = False
    return ok


@dataclass
class Sample:
    """CPU (per process) and memory of a server tree at one instant.

    `cpu` has nanosecond resolution but only counts threads alive at the sample; `ticks` (the
    process's /proc/PID/stat total, 10 ms steps) also holds the time of threads that exited,
    such as the thread a thread-per-connection server starts and ends within one run."""

    cpu: dict[int, float]
    rss: int
    peak_rss: int
    ticks: dict[int, float] = field(default_factory=dict)

    @classmethod
    def take(cls, leader: int) -> Sample:
        pids = process_tree(leader)
        return cls(cpu_by_pid(pids), rss_bytes(pids), peak_rss_bytes(pids), cpu_ticks_by_pid(pids))

    @property
    def pids(self) -> list[int]:
        return sorted(self.cpu)

    def cpu_since(self, before: Sample) -> float:
        """CPU seconds the tree spent between `before` and this sample. A process born meanwhile
        counts in full; one that died meanwhile is lost (its time is not readable any more).

        Per process, the precise live-thread delta is used unless the tick delta exceeds it by
        more than two ticks: user and system time are each truncated to a tick, so the tick
        delta is within two ticks of the truth, and a larger excess is time of threads that
        exited between the samples."""
        total = 0.0
        for p, t in self.cpu.items():
            precise = max(0.0, t - before.cpu.get(p, 0.0))
            if p in self.ticks:
                coarse = self.ticks[p] - before.ticks.get(p, 0.0)
                if coarse > precise + 2.0 / CLK_TCK:
                    precise = coarse
            total += precise
        return total


@dataclass
class CpuTimes:
    """Busy, steal and total jiffies of a set of CPUs, from /proc/stat, in seconds."""

    busy: float
    steal: float
    total: float

    def since(self, before: CpuTimes) -> CpuTimes:
        return CpuTimes(
            self.busy - before.busy, self.steal - before.steal, self.total - before.total
        )

    def busy_share(self) -> float:
        """The share of the available time (steal left out) that was busy; for a delta from
        `since`."""
        available = self.total - self.steal
        return (self.busy - self.steal) / available if available > 0 else 0.0


def cpu_times(cpus) -> CpuTimes:
    """Busy (everything but idle and iowait), steal and total time of the given CPUs."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = steal = total = 0
    for line in (PROC / "stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in wanted:
            vals = [int(x) for x in parts[1:]]
            busy += sum(vals[:8]) - vals[3] - vals[4]
            steal += vals[7] if len(vals) > 7 else 0
            total += sum(vals[:8])
    return CpuTimes(busy / CLK_TCK, steal / CLK_TCK, total / CLK_TCK)


def cpu_mhz(cpus) -> float | None:
    """Mean current frequency of the given CPUs (cpufreq when present, else /proc/cpuinfo)."""
    vals = []
    for c in cpus:
        try:
            vals.append(
                int(Path(f"/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_cur_freq").read_text())
                / 1000
            )
        except (OSError, ValueError):
            pass
    if not vals:
        try:
            cur = None
            for line in (PROC / "cpuinfo").read_text().splitlines():
                if line.startswith("processor"):
                    cur = int(line.split(":")[1])
                elif line.startswith("cpu MHz") and cur in set(cpus):
                    vals.append(float(line.split(":")[1]))
        except (OSError, ValueError):
            return None
    return round(sum(vals) / len(vals), 1) if vals else None


def cpu_busy_seconds(cpus) -> float:
    """Busy time (everything but idle and iowait) of the given CPUs since boot, from /proc/stat.

    Compared with the server's own CPU time over a run, it tells how much of the server CPUs went
    to other work (other processes, interrupts): a measure of how quiet the machine was."""
    wanted = {f"cpu{c}" for c in cpus}
    busy = 0
    for line in (PROC / "stat").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in wanted:
            vals = [int(x) for x in parts[1:]]
            # user nice system idle iowait irq softirq steal guest guest_nice; guest time is
            # already included in user.
            busy += sum(vals[:8]) - vals[3] - vals[4]
    return busy / CLK_TCK


@dataclass
class IdleMemory:
    connections: int
    opened: int
    rss_before: int
    rss_after: int
    seconds: float
    error: str | None = None

    @property
    def per_connection(self) -> float | None:
        if self.opened <= 0:
            return None
        return (self.rss_after - self.rss_before) / self.opened

    def to_json(self) -> dict:
        return {
            "connections": self.connections,
            "opened": self.opened,
            "rss_before_bytes": self.rss_before,
            "rss_after_bytes": self.rss_after,
            "per_connection_bytes": self.per_connection,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


def idle_memory(
    host: str, port: int, leader: int, scenario, n: int, timeout: float = 5.0, settle: float = 0.5
) -> IdleMemory:
    """Open `n` keep-alive connections that each send one request and read its answer, then stay
    idle; return the RSS growth of the server tree. Connections are opened one after the other so
    the server's accept backlog never overflows."""
    pids = process_tree(leader)
    time.sleep(settle)
    before = rss_bytes(pids)
    req = parity.build_request(scenario, host, port)
    socks: list[socket.socket] = []
    start = time.monotonic()
    error = None
    try:
        for i in range(n):
            try:
                s = socket.create_connection((host, port), timeout=timeout)
            except OSError as e:
                error = f"connection {i + 1} of {n}: {e}"
                break
            socks.append(s)
            try:
                s.sendall(req)
                parity.read_response(parity._Reader(s, time.monotonic() + timeout), scenario.method)
            except (OSError, parity.ProtocolError) as e:
                error = f"connection {i + 1} of {n}: {e}"
                break
        time.sleep(settle)
        pids = sorted(set(pids) | set(process_tree(leader)))
        after = rss_bytes(pids)
        opened = len(socks) if error is None else len(socks) - 1
    finally:
        for s in socks:
            s.close()
    return IdleMemory(n, max(opened, 0), before, after, time.monotonic() - start, error)
