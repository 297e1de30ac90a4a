"""The soak's Python clients on a thread of their own, at the lowest CPU priority.

The Python clients (TLS handshakes, HTTP/2, WebSocket, uploads) share the client CPU with oha,
which measures the steady load's latency open loop, from when each request was due. Each
Python operation runs for a few milliseconds of CPU at a time; on the same core at the same
priority, oha waits behind it, and every request due meanwhile counts that wait as latency.
The soak's p99 then measured the Python clients' time slices (it moved between 9 ms and 280 ms
from one 10-second sample to the next with the server at half a core), not the server.

Run here, on their own thread under `SCHED_IDLE` (a policy any process may take for its own
threads), they get the client CPU whenever oha does not want it, and oha preempts them at
once when it does. They still do all their work (the client CPU has room: the soak's rate
keeps it about 70% busy), and oha, forked from the main thread, keeps the normal policy.
"""

from __future__ import annotations

import asyncio
import os
import threading

from .soak_load import Clients, Tally

# Seconds to wait for the clients' thread to answer a tally request.
SWAP_TIMEOUT = 30.0


def lower_own_priority() -> str:
    """Puts the calling thread under SCHED_IDLE; failing that (a kernel without it), nice 19.
    Returns what it did, for the report."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        return "SCHED_IDLE"
    except (AttributeError, OSError):
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        return "nice 19"
    except OSError as e:
        return f"normal (could not lower it: {e})"


class ClientsThread:
    """Runs `clients.run()` on a new thread with its own event loop until `stop()`."""

    def __init__(self, clients: Clients, low_priority: bool = True):
        self.clients = clients
        self.low_priority = low_priority
        self.priority = "normal"
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="soak-clients", daemon=True)

    def start(self) -> ClientsThread:
        self._thread.start()
        self._ready.wait()
        return self

    def _main(self) -> None:
        if self.low_priority:
            self.priority = lower_own_priority()
        self._loop = asyncio.new_event_loop()
        self._ready.set()
        try:
            self._loop.run_until_complete(self.clients.run())
        except BaseException as e:  # reported by `join`
            self.error = e
        finally:
            self._loop.close()

    def swap(self) -> Tally:
        """The interval's tally, taken on the clients' own loop (no count is lost between
        reading the tally and replacing it)."""
        if not self._thread.is_alive():
            return self.clients.swap()

        async def take() -> Tally:
            return self.clients.swap()

        try:
            return asyncio.run_coroutine_threadsafe(take(), self._loop).result(SWAP_TIMEOUT)
        except RuntimeError:  # the loop closed meanwhile: the clients have ended
            return self.clients.swap()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self.clients.stop.set)

    async def join(self, timeout: float) -> bool:
        """Waits (without blocking the caller's loop) for the clients to end; False if they
        did not within `timeout` seconds. A client loop's crash is raised here."""
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, timeout)
        if self.error is not None:
            raise self.error
        return not self._thread.is_alive()
