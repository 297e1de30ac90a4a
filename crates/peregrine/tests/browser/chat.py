"""The chat example (crates/peregrine/examples/chat.rs) in a real browser: headless Chromium.

Over HTTPS with a certificate of a CA made here, which Chromium trusts through
--ignore-certificate-errors-spki-list (real TLS: the handshake and the chain are Chromium's
own; only this CA's key is accepted). Two chat tabs exchange messages over their WebSocket,
a third tab (/feed) receives them over server-sent events (EventSource); the test reads each
page's own log, checks every page came over HTTP/2 (nextHopProtocol "h2"), and keeps
screenshots under target/browser/. Chromium is driven through its DevTools protocol, with the
`websockets` package as the protocol's client.

    python3 chat.py CHAT_BINARY OUT_DIR
"""

import asyncio
import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import websockets

WAIT = 20.0  # seconds for any one step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def openssl(*args: str) -> bytes:
    return subprocess.run(["openssl", *args], check=True, capture_output=True).stdout


def make_certificates(work: Path) -> tuple[Path, Path, str]:
    """A CA and a localhost certificate it signs; the chain file holds both, so the CA is in
    the chain Chromium sees. Returns (chain, key, base64 SHA-256 of the CA's public key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl(
        "req",
        "-x509",
        *ec,
        "-days",
        "2",
        "-subj",
        "/CN=Peregrine browser test CA",
        "-keyout",
        str(work / "ca.key"),
        "-out",
        str(work / "ca.pem"),
    )
    openssl(
        "req",
        *ec,
        "-subj",
        "/CN=localhost",
        "-keyout",
        str(work / "key.pem"),
        "-out",
        str(work / "leaf.csr"),
    )
    (work / "ext.cnf").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        "basicConstraints=CA:FALSE\n"
    )
    openssl(
        "x509",
        "-req",
        "-in",
        str(work / "leaf.csr"),
        "-CA",
        str(work / "ca.pem"),
        "-CAkey",
        str(work / "ca.key"),
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        str(work / "ext.cnf"),
        "-out",
        str(work / "leaf.pem"),
    )
    chain = work / "chain.pem"
    chain.write_bytes((work / "leaf.pem").read_bytes() + (work / "ca.pem").read_bytes())
    public = openssl("x509", "-in", str(work / "ca.pem"), "-noout", "-pubkey")
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-outform", "der"],
        input=public,
        check=True,
        capture_output=True,
    ).stdout
    digest = subprocess.run(
        ["openssl", "dgst", "-sha256", "-binary"],
        input=der,
        check=True,
        capture_output=True,
    ).stdout
    return chain, work / "key.pem", base64.b64encode(digest).decode()


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the chat example exited early ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port} after {WAIT} s")


class DevTools:
    """One DevTools connection to the browser; pages are driven through flat sessions."""

    def __init__(self, ws):
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                msg = json.loads(raw)
                fut = self.pending.pop(msg.get("id"), None)
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except websockets.ConnectionClosed:
            pass  # the browser went away: pending calls time out with their own message

    async def call(self, method: str, session: str | None = None, **params):
        n = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        self.pending[n] = fut
        msg = {"id": n, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        await self.ws.send(json.dumps(msg))
        reply = await asyncio.wait_for(fut, WAIT)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def open(self, url: str) -> str:
        target = await self.call("Target.createTarget", url=url)
        attached = await self.call(
            "Target.attachToTarget", targetId=target["targetId"], flatten=True
        )
        return attached["sessionId"]

    async def js(self, session: str, expression: str):
        result = await self.call(
            "Runtime.evaluate",
            session,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def until(self, session: str, expression: str, what: str):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                value = await self.js(session, expression)
            except RuntimeError:
                value = None  # the page is still loading
            if value:
                return value
            await asyncio.sleep(0.1)
        raise SystemExit(f"FAIL: {what} (not within {WAIT} s)")

    async def screenshot(self, session: str, path: Path) -> None:
        shot = await self.call("Page.captureScreenshot", session, format="png")
        path.write_bytes(base64.b64decode(shot["data"]))


LOG_TEXT = "[...document.querySelectorAll('#log div')].map(d => d.textContent)"


async def drive(port_file: Path, origin: str, out: Path) -> None:
    deadline = time.monotonic() + WAIT
    while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
        if time.monotonic() > deadline:
            raise SystemExit("Chromium did not open its DevTools port")
        await asyncio.sleep(0.1)
    port, path = port_file.read_text().splitlines()[:2]
    async with websockets.connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as ws:
        cdp = DevTools(ws)
        try:
            await chat_in_three_tabs(cdp, origin, out)
        finally:
            cdp.reader.cancel()


async def chat_in_three_tabs(cdp: DevTools, origin: str, out: Path) -> None:
    alice = await cdp.open(f"{origin}/")
    bob = await cdp.open(f"{origin}/")
    feed = await cdp.open(f"{origin}/feed")
    for name, page, ready in [
        (
            "alice",
            alice,
            "typeof ws !== 'undefined' && ws.readyState === WebSocket.OPEN",
        ),
        ("bob", bob, "typeof ws !== 'undefined' && ws.readyState === WebSocket.OPEN"),
        ("feed", feed, "document.body && document.body.dataset.open === '1'"),
    ]:
        await cdp.until(page, ready, f"{name}'s page connected")
        proto = await cdp.js(
            page, "performance.getEntriesByType('navigation')[0].nextHopProtocol"
        )
        print(f"{name}: page loaded over {proto}")
        if proto != "h2":
            raise SystemExit(f"FAIL: {name}'s page came over {proto!r}, not h2")

    async def say(page: str, text: str) -> None:
        # Through the page's own form, as a user would.
        await cdp.js(
            page,
            f"document.getElementById('m').value = {json.dumps(text)};"
            "document.getElementById('f').requestSubmit()",
        )

    async def sees(page: str, name: str, text: str) -> None:
        await cdp.until(
            page, f"{LOG_TEXT}.includes({json.dumps(text)})", f"{name} shows {text!r}"
        )
        print(f"{name} shows {text!r}")

    await say(alice, "hello from alice")
    for name, page in [("bob", bob), ("alice", alice), ("feed", feed)]:
        await sees(page, name, "hello from alice")
    await say(bob, "hi alice, bob here")
    for name, page in [("alice", alice), ("feed", feed)]:
        await sees(page, name, "hi alice, bob here")

    await cdp.screenshot(alice, out / "chat-alice.png")
    await cdp.screenshot(feed, out / "chat-feed.png")
    print(f"screenshots in {out}")


def main() -> int:
    chat, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (scripts/setup installs it)")
    work = Path(tempfile.mkdtemp(prefix="peregrine-browser-"))
    procs: list[subprocess.Popen] = []
    server_log = open(out / "chat-server.log", "wb")  # noqa: SIM115 (closed in finally)
    browser_log = open(out / "chromium.log", "wb")  # noqa: SIM115 (closed in finally)
    try:
        chain, key, spki = make_certificates(work)
        plain, tls = free_port(), free_port()
        env = dict(
            os.environ,
            ADDR=f"127.0.0.1:{plain}",
            TLS_ADDR=f"127.0.0.1:{tls}",
            WORKERS="2",
            TLS_CERT=str(chain),
            TLS_KEY=str(key),
        )
        procs.append(
            subprocess.Popen(
                [str(chat)], env=env, stdout=server_log, stderr=subprocess.STDOUT
            )
        )
        wait_for_port(tls, procs[0])
        profile = work / "profile"
        procs.append(
            subprocess.Popen(
                [
                    browser,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--no-first-run",
                    "--disable-dev-shm-usage",
                    f"--user-data-dir={profile}",
                    "--remote-debugging-port=0",
                    f"--ignore-certificate-errors-spki-list={spki}",
                    "--window-size=900,700",
                    "about:blank",
                ],
                stdout=browser_log,
                stderr=subprocess.STDOUT,
            )
        )
        asyncio.run(
            drive(profile / "DevToolsActivePort", f"https://localhost:{tls}", out)
        )
        # The browser goes first: its open WebSocket and SSE streams would hold the drain
        # until the shutdown timeout.
        procs[1].terminate()
        procs[1].wait(timeout=WAIT)
        # SIGTERM: App::run drains and returns, so the example exits 0.
        procs[0].terminate()
        code = procs[0].wait(timeout=WAIT)
        if code != 0:
            raise SystemExit(f"FAIL: the chat example exited {code} on SIGTERM, not 0")
        print("chat example: exit 0 after SIGTERM")
        print("browser: PASS")
        return 0
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        server_log.close()
        browser_log.close()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
