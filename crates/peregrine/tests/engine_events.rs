//! The engine's own refusals and connection events reach the access log and the metrics through
//! `Config::events` (`metrics::EngineObserver`), over real sockets: a malformed request
//! line, a header section over the limit, a body over the limit and a header timeout each
//! appear as a `rejected` event with their reason, and as `peregrine_rejections_total{reason}`.

mod common;
use common::{LogCapture, TestServer};
use peregrine::metrics::{self, EngineObserver};
use peregrine::{get, App, Request};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

/// Sends `raw` on a fresh connection and returns everything the server wrote before closing.
fn exchange(s: &TestServer, raw: &[u8]) -> String {
    let mut c = std::net::TcpStream::connect(s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn engine_rejections_reach_the_access_log_and_metrics_with_their_reason() {
    let capture = LogCapture::install();
    let prometheus = metrics::install().unwrap();
    let app = App::new()
        .route("/", get(|_r: Request| async { "hi" }))
        .route("/metrics", prometheus.endpoint());
    let s = TestServer::start_with(app, |c| {
        c.events = Some(Arc::new(EngineObserver::new()));
        c.server.timeouts.header = Duration::from_millis(300);
    });
    assert!(exchange(&s, b"GET /\x01 HTTP/1.1\r\nHost: t\r\n\r\n").starts_with("HTTP/1.1 400"));
    let big = format!(
        "GET / HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
        "a".repeat(100_000)
    );
    assert!(exchange(&s, big.as_bytes()).starts_with("HTTP/1.1 431"));
    // No body_too_large here: a served App answers the body limit itself (problem+json 413,
    // see `App::body_limit`), so the engine never refuses a body for it.
    assert!(exchange(&s, b"GET / HTTP/1.1\r\nHost: t\r\n").starts_with("HTTP/1.1 408"));
    let scrape = s.get("/metrics", &[]).text().to_owned();
    drop(s);

    let log = capture.text();
    let rejected: Vec<&str> = log.lines().filter(|l| l.contains("rejected")).collect();
    for (reason, status) in [
        ("bad_request", 400),
        ("header_too_large", 431),
        ("header_timeout", 408),
    ] {
        assert!(
            rejected
                .iter()
                .any(|l| l.contains(&format!("reason=\"{reason}\""))
                    && l.contains(&format!("status={status}"))),
            "{reason}: {log}"
        );
        assert!(
            scrape.contains(&format!(
                "peregrine_rejections_total{{reason=\"{reason}\"}} 1"
            )),
            "{reason}: {scrape}"
        );
    }
    assert!(
        scrape.contains("peregrine_connections_total{worker=\"0\"}"),
        "{scrape}"
    );
}
