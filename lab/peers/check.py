#!/usr/bin/env python3
"""Quick contract check of one running peer, for whoever writes or edits a peer.

Usage: check.py HOST:PORT [scenario ...]   (default: every scenario in ../contract/scenarios.json)
       check.py HOST:PORT --peer NAME       (the scenarios NAME lists in peers.toml)

Sends each scenario's request over one keep-alive connection and compares the answer with the
contract: status, Content-Type prefix, body (bytes, JSON or JSON file), required/exact/absent headers,
Server and Date, and that Content-Length matches the body. Exits 1 if any scenario mismatches.
The lab runner's parity check is the official one; this is the same idea with no dependencies.
"""
import http.client
import json
import pathlib
import sys

CONTRACT_DIR = pathlib.Path(__file__).resolve().parent.parent / "contract"


def check(conn, scenario, required):
    req, exp = scenario["request"], scenario["expect"]
    body = req.get("body")
    conn.request(req["method"], req["path"], body=body.encode() if body else None,
                 headers=req.get("headers", {}))
    res = conn.getresponse()
    data = res.read()
    headers = {k.lower(): v for k, v in res.getheaders()}
    problems = []
    if res.status != exp["status"]:
        problems.append(f"status {res.status} != {exp['status']}")
    for name in required + exp.get("headers", []):
        if name not in headers:
            problems.append(f"missing header {name}")
    for name, value in exp.get("header_values", {}).items():
        if headers.get(name) != value:
            problems.append(f"header {name}={headers.get(name)!r} != {value!r}")
    for name in exp.get("absent_headers", []):
        if name in headers:
            problems.append(f"header {name} present ({headers[name]!r})")
    prefix = exp.get("content_type_prefix")
    if prefix and not headers.get("content-type", "").startswith(prefix):
        problems.append(f"content-type {headers.get('content-type')!r} lacks prefix {prefix!r}")
    if "content-length" in headers and int(headers["content-length"]) != len(data):
        problems.append("content-length does not match the body")
    if "body" in exp and data != exp["body"].encode():
        problems.append(f"body {data[:80]!r} != {exp['body']!r}")
    want = exp.get("json")
    if "json_file" in exp:
        want = json.loads((CONTRACT_DIR / exp["json_file"]).read_text())
    if want is not None:
        try:
            got = json.loads(data)
        except ValueError:
            problems.append(f"body is not JSON: {data[:80]!r}")
        else:
            if got != want:
                problems.append(f"JSON {json.dumps(got)[:120]} != {json.dumps(want)[:120]}")
    return problems


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    contract = json.loads((CONTRACT_DIR / "scenarios.json").read_text())
    wanted = set(sys.argv[2:])
    if sys.argv[2:3] == ["--peer"] and len(sys.argv) == 4:
        import tomllib

        registry = tomllib.loads((CONTRACT_DIR.parent / "peers" / "peers.toml").read_text())
        peers = {p["name"]: p for p in registry["peer"]}
        if sys.argv[3] not in peers:
            sys.exit(f"no peer {sys.argv[3]!r} in peers.toml")
        wanted = set(peers[sys.argv[3]]["scenarios"])
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    failed = 0
    for sc in contract["scenarios"]:
        if wanted and sc["name"] not in wanted:
            continue
        problems = check(conn, sc, contract["required_headers"])
        print(f"{'ok  ' if not problems else 'FAIL'} {sc['name']:<11} {'; '.join(problems)}")
        failed += bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
