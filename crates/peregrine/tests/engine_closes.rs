//! The engine's closes without a response reach the access log and the metrics with their
//! reason, over real sockets (`Config::events` = `metrics::EngineObserver`): an idle
//! keep-alive connection timing out (`idle_close`), a new connection that sends nothing
//! (`header_timeout`, status 0), a client that does not read (`write_timeout`), the connection
//! limits (`limit_reached`: `max_connections_per_addr`, `max_connections` and the idle
//! connection closed to make room) and a malformed PROXY header (`proxy_protocol`). The
//! per-worker gauges (open, idle) and the socket byte counters appear in the scrape.
//!
//! One test: the tracing subscriber and the metrics recorder are process-wide.

mod common;
use common::{LogCapture, TestServer};
use peregrine::config::Config;
use peregrine::metrics::{self, EngineObserver};
use peregrine::server::proxy_protocol::ProxyProtocolAcceptor;
use peregrine::server::transport::PlainAcceptor;
use peregrine::server::{Server, ServerConfig};
use peregrine::{get, App, Request, ResponseBody};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn connect(addr: std::net::SocketAddr) -> TcpStream {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c
}

/// Sends one keep-alive request and reads its (small, `Content-Length`) response.
fn request(c: &mut TcpStream, path: &str) -> String {
    write!(c, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got);
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .or_else(|| {
                    text[..end]
                        .lines()
                        .find_map(|l| l.strip_prefix("Content-Length: "))
                })
                .map_or(0, |v| v.trim().parse().unwrap());
            if got.len() >= end + 4 + len {
                return text.into_owned();
            }
        }
    }
}

/// Whether the server closed `c` (EOF or reset) within the read timeout (a timeout is not a
/// close).
fn closed_by_server(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Waits until `log` shows a `rejected` line with `reason` and `detail` (the engine reports on
/// its worker thread, just before or after the socket closes).
fn wait_for_line(log: &LogCapture, reason: &str, detail: &str) -> String {
    let start = Instant::now();
    loop {
        let text = log.text();
        if let Some(line) = text.lines().find(|l| {
            l.contains("rejected")
                && l.contains(&format!("reason=\"{reason}\""))
                && l.contains(detail)
        }) {
            return line.to_owned();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no {reason} ({detail}) in: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn counter(scrape: &str, series: &str) -> u64 {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[test]
fn engine_closes_reach_the_access_log_and_metrics_with_their_reason() {
    let log = LogCapture::install();
    let prometheus = metrics::install().unwrap();
    let big = bytes::Bytes::from(vec![b'x'; 64 << 20]);
    let app = || {
        let big = big.clone();
        App::new()
            .route("/", get(|_r: Request| async { "hi" }))
            .route(
                "/big",
                get(move |_r: Request| {
                    let big = big.clone();
                    async move { peregrine::Response::new(200).with_body(ResponseBody::Full(big)) }
                }),
            )
            .route("/metrics", prometheus.endpoint())
    };
    let observed = |c: &mut Config| {
        c.events = Some(Arc::new(EngineObserver::new()));
        c.server.timeouts.header = Duration::from_millis(300);
        c.server.timeouts.idle = Duration::from_millis(400);
        c.server.timeouts.write = Duration::from_millis(300);
        c.server.limits.max_connections_per_addr = Some(3);
    };
    let s = TestServer::start_with(app(), observed);

    // A keep-alive connection left idle is closed after idle_timeout.
    let mut idle = connect(s.addr);
    assert!(request(&mut idle, "/").starts_with("HTTP/1.1 200"));
    assert!(closed_by_server(&mut idle));
    let line = wait_for_line(&log, "idle_close", "idle_timeout");
    assert!(line.contains("status=0"), "{line}");

    // A new connection that sends nothing: closed after header_timeout, nothing answered.
    let mut silent = connect(s.addr);
    assert!(closed_by_server(&mut silent));
    wait_for_line(&log, "header_timeout", "no request before header_timeout");

    // A client that does not read a large response: the write times out.
    let mut stuck = connect(s.addr);
    write!(stuck, "GET /big HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    wait_for_line(&log, "write_timeout", "write_timeout");
    drop(stuck);
    // (The closed connections give their places in the address's count back.)
    std::thread::sleep(Duration::from_millis(300));

    // Past max_connections_per_addr (3), a new connection is closed at once.
    let held: Vec<TcpStream> = (0..3).map(|_| connect(s.addr)).collect();
    let mut fourth = connect(s.addr);
    assert!(closed_by_server(&mut fourth));
    wait_for_line(&log, "limit_reached", "max_connections_per_addr");
    drop(held);
    std::thread::sleep(Duration::from_millis(300));

    // At max_connections (2), a new connection waits, and the oldest idle one makes room.
    let full = TestServer::start_with(app(), |c| {
        observed(c);
        c.server.timeouts.idle = Duration::from_secs(60);
        c.server.limits.max_connections = 2;
    });
    let mut a = connect(full.addr);
    let mut b = connect(full.addr);
    assert!(request(&mut a, "/").starts_with("HTTP/1.1 200"));
    assert!(request(&mut b, "/").starts_with("HTTP/1.1 200"));
    let mut third = connect(full.addr);
    assert!(request(&mut third, "/").starts_with("HTTP/1.1 200"));
    // One of the two idle connections made room (the longest waiting, to the sweeper's tick).
    for c in [&a, &b] {
        c.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
    }
    let closed = [&mut a, &mut b].map(closed_by_server);
    assert_eq!(closed.iter().filter(|c| **c).count(), 1, "{closed:?}");
    wait_for_line(&log, "limit_reached", "max_connections: waiting");
    wait_for_line(
        &log,
        "limit_reached",
        "idle connection closed at max_connections",
    );
    drop((b, third, full));

    // A PROXY-protocol listener: a malformed header closes the connection, with its reason.
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .shutdown_timeout(Duration::from_secs(2))
        .build();
    let proxied = Server::new(config)
        .with_events(Arc::new(EngineObserver::new()))
        .with_acceptor(ProxyProtocolAcceptor::new(PlainAcceptor).timeout(Duration::from_secs(2)))
        .serve(app().into_service())
        .unwrap();
    let mut bad = connect(proxied.local_addr());
    bad.write_all(b"PROXY TCP4 1.2.3.4 nonsense\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert!(closed_by_server(&mut bad));
    let line = wait_for_line(&log, "proxy_protocol", "detail=");
    assert!(line.contains("status=0"), "{line}");
    proxied.shutdown();

    // Every reason is counted, and the worker's own counts are in the scrape (reported at its
    // sweeper's next tick, at most a second later).
    let mut keep = connect(s.addr);
    assert!(request(&mut keep, "/").starts_with("HTTP/1.1 200"));
    // At least the request heads sent to this server before `keep` was answered: `/` twice,
    // `/big` once (the scrapes are counted at later ticks).
    let heads = 2 * "GET / HTTP/1.1\r\nHost: t\r\n\r\n".len() as u64
        + "GET /big HTTP/1.1\r\nHost: t\r\n\r\n".len() as u64;
    // The gauges may still hold an earlier tick's counts (the first idle connection was idle at
    // one), so wait for a tick that has seen every head, not just any idle connection.
    let start = Instant::now();
    let scrape = loop {
        let scrape = s.get("/metrics", &[]).text().to_owned();
        let settled = counter(&scrape, "peregrine_connections_idle{worker=\"0\"}") >= 1
            && counter(
                &scrape,
                "peregrine_transport_received_bytes_total{worker=\"0\"}",
            ) >= heads;
        if settled || start.elapsed() > Duration::from_secs(10) {
            break scrape;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(s);
    for (reason, at_least) in [
        ("idle_close", 1),
        ("header_timeout", 1),
        ("write_timeout", 1),
        ("limit_reached", 3),
        ("proxy_protocol", 1),
    ] {
        let n = counter(
            &scrape,
            &format!("peregrine_rejections_total{{reason=\"{reason}\"}}"),
        );
        assert!(n >= at_least, "{reason}: {n}\n{scrape}");
    }
    // `keep` waits idle, so it is open too (a scrape's own connection may or may not be open at
    // the tick that reported these counts).
    assert!(
        counter(&scrape, "peregrine_connections_idle{worker=\"0\"}") >= 1,
        "{scrape}"
    );
    assert!(
        counter(&scrape, "peregrine_connections_open{worker=\"0\"}") >= 1,
        "{scrape}"
    );
    // Socket bytes: the write-timeout response alone sent megabytes, far more than any body
    // counter of a request that completed.
    let sent = counter(
        &scrape,
        "peregrine_transport_sent_bytes_total{worker=\"0\"}",
    );
    let received = counter(
        &scrape,
        "peregrine_transport_received_bytes_total{worker=\"0\"}",
    );
    assert!(sent > 1 << 20, "sent {sent}\n{scrape}");
    assert!(received >= heads, "received {received}\n{scrape}");
    drop(keep);
}
