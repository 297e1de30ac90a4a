"""What the protocols lanes check before and beside measuring: the run's certificate, the one
TLS setting every client of the run uses, the handshake each server negotiates, parity over
HTTPS (HTTP/1.1) and HTTP/2, and memory per idle TLS and HTTP/2 connection."""

from __future__ import annotations

import re
import socket
import ssl
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import metrics, parity
from .peers import Scenario

# ------------------------------------------------------------------ certificate and client setting

CURVE = "prime256v1"
"""Every server gets the same self-signed ECDSA P-256 certificate (what the web mostly serves)."""

TLS13_SUITE = "TLS_AES_128_GCM_SHA256"
GROUP = "X25519"

CLIENT_OPENSSL_CONF = f"""# The OpenSSL setting of every client of the protocols lanes (wrk, ab,
# h2load, openssl s_client, curl), written by the lab. Servers choose differently from one offer
# (Go prefers AES-128-GCM; OpenSSL and rustls follow the client's order, which starts with
# AES-256-GCM), so the clients offer one of each: TLS 1.3, {TLS13_SUITE}, {GROUP}.
openssl_conf = lab_conf
[lab_conf]
ssl_conf = lab_ssl
[lab_ssl]
system_default = lab_tls
[lab_tls]
MinProtocol = TLSv1.3
MaxProtocol = TLSv1.3
Ciphersuites = {TLS13_SUITE}
Groups = {GROUP}
"""


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path
    client_conf: Path
    description: str

    def to_json(self) -> dict:
        return {
            "cert": str(self.cert),
            "key": str(self.key),
            "client_openssl_conf": CLIENT_OPENSSL_CONF,
            "description": self.description,
        }


def make_certificate(folder: Path) -> Certificate:
    """A fresh self-signed ECDSA P-256 certificate for localhost and 127.0.0.1 (one per run),
    and the clients' OpenSSL configuration file beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{CURVE}"]
        + ["-nodes", "-days", "2", "-subj", "/CN=localhost"]
        + ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        + ["-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    key.chmod(0o644)  # nginx workers run as an unprivileged user when the lab runs as root
    folder.chmod(0o755)
    conf = folder / "client-openssl.cnf"
    conf.write_text(CLIENT_OPENSSL_CONF)
    text = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-text"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    sig = re.search(r"Signature Algorithm:\s*(\S+)", text)
    curve = re.search(r"NIST CURVE:\s*(\S+)|ASN1 OID:\s*(\S+)", text)
    desc = (
        f"self-signed, ECDSA {curve.group(1) or curve.group(2) if curve else CURVE}, "
        f"signature {sig.group(1) if sig else '?'}, CN=localhost, "
        "SAN DNS:localhost IP:127.0.0.1"
    )
    return Certificate(cert, key, conf, desc)


def client_env(cert: Certificate, base: dict[str, str]) -> dict[str, str]:
    """The environment of a client process: the lab's OpenSSL setting."""
    return {**base, "OPENSSL_CONF": str(cert.client_conf)}


def client_context(alpn: list[str]) -> ssl.SSLContext:
    """Python's client side with the same offer as the other clients (TLS 1.3, one suite, one
    group is not settable from Python's ssl: TLS 1.3 only and the ALPN are; the suite and group
    that were negotiated are recorded by `handshake_info`)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.set_alpn_protocols(alpn)
    return ctx


# ------------------------------------------------------------------ negotiated handshake


def parse_s_client(text: str) -> dict[str, str | None]:
    """TLS version, cipher, key exchange, peer signature and ALPN from `openssl s_client`."""

    def grab(pattern):
        m = re.search(pattern, text, re.M)
        return m.group(1).strip() if m else None

    return {
        "protocol": grab(r"^New, (TLSv[\d.]+), Cipher is") or grab(r"^\s*Protocol\s*:\s*(\S+)"),
        "cipher": grab(r"^New, TLSv[\d.]+, Cipher is (\S+)") or grab(r"^\s*Cipher\s*:\s*(\S+)"),
        "key_exchange": grab(r"^(?:Server|Peer) Temp Key: (.+)$"),
        "signature": grab(r"^Peer signature type: (.+)$"),
        "alpn": grab(r"^ALPN protocol: (.+)$"),
    }


def handshake_info(host: str, port: int, cert: Certificate, env: dict, alpn: str) -> dict:
    """One `openssl s_client` handshake with the clients' setting, offering `alpn`."""
    cmd = ["openssl", "s_client", "-connect", f"{host}:{port}", "-servername", "localhost"]
    cmd += ["-alpn", alpn]
    try:
        p = subprocess.run(
            cmd,
            input="",
            capture_output=True,
            text=True,
            errors="replace",  # an h2 server's first frames are binary
            timeout=15,
            env=client_env(cert, env),
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": str(e)}
    info = parse_s_client(p.stdout)
    info["offered_alpn"] = alpn
    if info["protocol"] is None:
        info["error"] = (p.stderr or p.stdout).strip()[-300:]
    return info


# ------------------------------------------------------------------ parity over TLS


def tls_exchange(
    host: str, port: int, scenario: Scenario, count: int = 2, timeout: float = 5.0
) -> list[parity.Response]:
    """`parity.exchange` over TLS with ALPN http/1.1: `count` requests on one connection."""
    ctx = client_context(["http/1.1"])
    out = []
    with socket.create_connection((host, port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as sock:
            alpn = sock.selected_alpn_protocol()
            if alpn not in (None, "http/1.1"):
                raise parity.ProtocolError(f"ALPN {alpn!r} chosen when only http/1.1 was offered")
            reader = parity._Reader(sock, time.monotonic() + timeout)
            for i in range(count):
                try:
                    sock.sendall(parity.build_request(scenario, host, port))
                except OSError as e:
                    raise parity.ProtocolError(f"request {i + 1}: cannot send: {e}") from e
                start = reader.received - len(reader.buf)
                resp = parity.read_response(reader, scenario.method)
                resp.wire_bytes = reader.received - len(reader.buf) - start
                out.append(resp)
                reader.deadline = time.monotonic() + timeout
    return out


def check_https(
    host: str, port: int, scenario: Scenario, required_headers: list[str], timeout: float = 5.0
) -> parity.ParityResult:
    """The scenario twice on one TLS keep-alive connection, each answer against the contract."""
    try:
        responses = tls_exchange(host, port, scenario, count=2, timeout=timeout)
    except (parity.ProtocolError, OSError, ssl.SSLError) as e:
        # One request alone, to tell "wrong" from "does not keep the connection alive".
        try:
            single = tls_exchange(host, port, scenario, count=1, timeout=timeout)[0]
        except (parity.ProtocolError, OSError, ssl.SSLError) as e2:
            return parity.ParityResult(scenario.name, False, [f"no valid response over TLS: {e2}"])
        problems = parity.check_response(scenario, single, required_headers)
        problems.append(
            f"second request on the same TLS connection failed ({e}): the load generator "
            "needs keep-alive (Connection: close?)"
        )
        return parity.ParityResult(
            scenario.name, False, problems, single.status, single.headers, len(single.body)
        )
    problems = []
    for i, r in enumerate(responses):
        for p in parity.check_response(scenario, r, required_headers):
            tagged = p if i == 0 else f"second request: {p}"
            if tagged not in problems:
                problems.append(tagged)
    first = responses[0]
    if any("close" in v.lower() for v in first.values("connection")):
        problems.append("answered with Connection: close: the load generator needs keep-alive")
    return parity.ParityResult(
        scenario.name,
        not problems,
        problems,
        first.status,
        first.headers,
        len(first.body),
        first.wire_bytes,
    )


def parse_curl_output(out: bytes) -> tuple[str, parity.Response]:
    """`curl -s -i -w '\\n%{http_version}'` output: (HTTP version, response)."""
    text, _, version = out.rpartition(b"\n")
    head, sep, body = text.partition(b"\r\n\r\n")
    if not sep:
        raise parity.ProtocolError(f"no header block in curl's output {out[:120]!r}")
    ver, status, reason, headers = parity._parse_head(head)
    return version.decode().strip(), parity.Response(ver, status, reason, headers, body)


def check_h2(
    host: str,
    port: int,
    scenario: Scenario,
    required_headers: list[str],
    cert: Certificate,
    env: dict,
    timeout: float = 5.0,
) -> parity.ParityResult:
    """The scenario over HTTP/2 (curl, ALPN h2), twice, each answer against the contract; the
    answer must really be HTTP/2."""
    url = f"https://{host}:{port}{scenario.path}"
    cmd = ["curl", "-s", "-k", "-i", "--http2", "--max-time", str(max(1, round(timeout)))]
    cmd += ["-X", scenario.method, "-w", r"\n%{http_version}"]
    for k, v in scenario.headers.items():
        cmd += ["-H", f"{k}: {v}"]
    problems: list[str] = []
    first = None
    for i in range(2):
        try:
            p = subprocess.run(
                cmd + [url],
                capture_output=True,
                timeout=timeout + 5,
                env=client_env(cert, env),
            )
            if p.returncode != 0:
                raise parity.ProtocolError(f"curl exited with {p.returncode}")
            version, resp = parse_curl_output(p.stdout)
        except (parity.ProtocolError, OSError, subprocess.TimeoutExpired) as e:
            return parity.ParityResult(scenario.name, False, [f"no valid HTTP/2 response: {e}"])
        if version != "2":
            problems.append(f"answered over HTTP/{version}, not HTTP/2")
        for prob in parity.check_response(scenario, resp, required_headers):
            tagged = prob if i == 0 else f"second request: {prob}"
            if tagged not in problems:
                problems.append(tagged)
        first = first or resp
    return parity.ParityResult(
        scenario.name, not problems, problems, first.status, first.headers, len(first.body)
    )


# ------------------------------------------------------------------ idle memory

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    head = struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream)
    return head + payload


def h2_request(path: str, authority: str) -> bytes:
    """Preface, empty SETTINGS and one GET on stream 1, its header block in HPACK without
    Huffman coding or indexing (RFC 7541 §6.1, §6.2.2): all any server must accept."""

    def literal(index: int, value: str) -> bytes:
        v = value.encode()
        return bytes([index]) + bytes([len(v)]) + v  # 4-bit name index, 7-bit length (< 127)

    block = bytes([0x82, 0x87]) + literal(4, path) + literal(1, authority)  # GET https
    return H2_PREFACE + _frame(0x4, 0, 0, b"") + _frame(0x1, 0x4 | 0x1, 1, block)


def read_h2_response(sock, deadline: float) -> int:
    """Read frames until stream 1 ends (a frame on it with END_STREAM); SETTINGS are
    acknowledged. Returns the bytes read. Raises ProtocolError on GOAWAY, RST_STREAM or EOF."""
    buf, got = b"", 0
    while True:
        while len(buf) >= 9:
            length = int.from_bytes(buf[:3], "big")
            if len(buf) < 9 + length:
                break
            kind, flags = buf[3], buf[4]
            stream = int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
            buf = buf[9 + length :]
            if kind == 0x4 and not flags & 0x1:
                sock.sendall(_frame(0x4, 0x1, 0, b""))  # SETTINGS ACK
            elif kind == 0x7:
                raise parity.ProtocolError("GOAWAY before the response")
            elif kind == 0x3 and stream == 1:
                raise parity.ProtocolError("RST_STREAM on the request")
            elif stream == 1 and kind in (0x0, 0x1) and flags & 0x1:
                return got
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise parity.ProtocolError("timed out waiting for the HTTP/2 response")
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            raise parity.ProtocolError("connection closed before the HTTP/2 response ended")
        got += len(chunk)
        buf += chunk


def idle_memory(
    host: str,
    port: int,
    leader: int,
    scenario: Scenario,
    n: int,
    protocol: str,
    timeout: float = 5.0,
    settle: float = 0.5,
) -> metrics.IdleMemory:
    """`metrics.idle_memory` over TLS: `n` connections that each complete a handshake, send one
    request and read its answer (`protocol` "https": HTTP/1.1 by ALPN; "h2": HTTP/2 by ALPN),
    then stay idle; the RSS growth of the server tree."""
    pids = metrics.process_tree(leader)
    time.sleep(settle)
    before = metrics.rss_bytes(pids)
    ctx = client_context(["h2"] if protocol == "h2" else ["http/1.1"])
    socks: list[socket.socket] = []
    start = time.monotonic()
    error = None
    req = (
        h2_request(scenario.path, f"localhost:{port}")
        if protocol == "h2"
        else parity.build_request(scenario, host, port)
    )
    try:
        for i in range(n):
            try:
                raw = socket.create_connection((host, port), timeout=timeout)
                s = ctx.wrap_socket(raw, server_hostname="localhost")
            except (OSError, ssl.SSLError) as e:
                error = f"connection {i + 1} of {n}: {e}"
                break
            socks.append(s)
            try:
                if protocol == "h2" and s.selected_alpn_protocol() != "h2":
                    raise parity.ProtocolError(f"ALPN {s.selected_alpn_protocol()!r}, not h2")
                s.sendall(req)
                if protocol == "h2":
                    read_h2_response(s, time.monotonic() + timeout)
                else:
                    reader = parity._Reader(s, time.monotonic() + timeout)
                    parity.read_response(reader, scenario.method)
            except (OSError, ssl.SSLError, parity.ProtocolError) as e:
                error = f"connection {i + 1} of {n}: {e}"
                break
        time.sleep(settle)
        pids = sorted(set(pids) | set(metrics.process_tree(leader)))
        after = metrics.rss_bytes(pids)
        opened = len(socks) if error is None else len(socks) - 1
    finally:
        for s in socks:
            s.close()
    return metrics.IdleMemory(n, max(opened, 0), before, after, time.monotonic() - start, error)
