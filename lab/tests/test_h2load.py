"""h2load (the HTTP/2 lane's load generator): its command and the parsing of its report."""

from pathlib import Path

from peregrine_lab import h2load

FIXTURE = Path(__file__).parent / "fixtures" / "h2load-node-http2.txt"


def test_command_is_timing_mode_with_the_labs_tls_offer():
    cmd = h2load.command(
        "https://127.0.0.1:1/plaintext",
        connections=50,
        streams=10,
        duration=3,
        tls13_ciphers="TLS_AES_128_GCM_SHA256",
        groups="X25519",
    )
    assert cmd[:7] == ["h2load", "-c", "50", "-m", "10", "-t", "1"]
    assert "--tls13-ciphers=TLS_AES_128_GCM_SHA256" in cmd
    assert "--groups=X25519" in cmd
    assert cmd[cmd.index("-D") + 1] == "3"
    assert cmd[-1] == "https://127.0.0.1:1/plaintext"


def test_a_real_report_is_read():
    """A report h2load 1.52 printed here (against the node-http2 peer)."""
    text = FIXTURE.read_text()
    res = h2load.parse_output(text)
    assert res.requests == 6200
    assert res.duration_s == 3.02
    assert res.bytes == 326340
    assert res.status_counts == {"2xx": 6600}
    assert res.latency_us["mean"] == 191410.0
    assert h2load.check_statuses(res) == []
    assert h2load.parse_tls(text) == {
        "protocol": "TLSv1.3",
        "cipher": "TLS_AES_256_GCM_SHA384",
        "key_exchange": "X25519 253 bits",
        "alpn": "h2",
    }


def test_failed_streams_and_error_statuses_invalidate_a_run():
    text = (
        "finished in 2.00s, 10.00 req/s, 1KB/s\n"
        "requests: 30 total, 30 started, 30 done, 20 succeeded, 10 failed, 4 errored, 2 timeout\n"
        "status codes: 15 2xx, 0 3xx, 5 4xx, 0 5xx\n"
    )
    res = h2load.parse_output(text)
    assert res.requests == 20
    assert res.errors["timeout"] == 2
    assert res.errors["other"] == 4 + 4  # errored, and failed streams neither errored nor timed out
    problems = h2load.check_statuses(res)
    assert any("timeout" in p for p in problems)
    assert any("4xx" in p for p in problems)


def test_output_without_a_report_is_an_error():
    import pytest

    with pytest.raises(h2load.LoadgenError, match="no report"):
        h2load.parse_output("starting benchmark...\nNo protocol negotiated. Aborted\n")


def test_microsecond_and_second_durations():
    text = (
        "finished in 900.5ms, 5.00 req/s, 1KB/s\n"
        "requests: 5 total, 5 started, 5 done, 5 succeeded, 0 failed, 0 errored, 0 timeout\n"
        "time for request:      212us     1.5s     300us     1ms    90%\n"
    )
    res = h2load.parse_output(text)
    assert abs(res.duration_s - 0.9005) < 1e-9
    assert res.latency_us["mean"] == 300.0


def test_a_request_count_replaces_the_timed_mode():
    """The lab runs h2load with -n (its timed mode was seen never to exit here)."""
    cmd = h2load.command(
        "https://127.0.0.1:1/plaintext", connections=50, streams=10, duration=3, requests=30
    )
    assert "-D" not in cmd
    assert cmd[cmd.index("-n") + 1] == "50"  # at least one request per connection
    cmd = h2load.command(
        "https://127.0.0.1:1/plaintext", connections=50, streams=10, duration=3, requests=9000
    )
    assert cmd[cmd.index("-n") + 1] == "9000"
