//! The access log (`peregrine::access_log`) over real sockets: exactly one line per request of
//! every kind (answered, 404, 405, malformed 400, 413 (the application's: it raises the
//! engine's limit to its own), 431, 408 header and body timeouts, a handler's panic, a client
//! that leaves while its handler works, a connection refused at its address's cap, HTTP/2),
//! counted against the client's own count;
//! and, written to a full disk, lines dropped and counted while the server keeps serving.

mod common;
mod faults_support;

use common::TestServer;
use faults_support::SmallDisk;
use peregrine::access_log::AccessLog;
use peregrine::{get, post, App, Request};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

async fn panics(_r: Request) -> &'static str {
    panic!("a handler panics on purpose")
}

fn app(log: &AccessLog) -> App {
    App::new()
        .route("/", get(|_r: Request| async { "ok" }))
        .route("/panic", get(panics))
        .route(
            "/slow",
            get(|_r: Request| async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                "late"
            }),
        )
        .route(
            "/echo",
            post(|mut r: Request| async move { r.bytes().await.map(|b| b.len().to_string()) }),
        )
        .layer_before_routing(log.clone())
}

fn server(log: &AccessLog) -> TestServer {
    TestServer::start_with(app(log), |c| {
        c.events = Some(Arc::new(log.clone()));
        c.server.timeouts.header = Duration::from_millis(300);
        c.server.timeouts.body = Duration::from_millis(300);
        c.server.limits.max_body_size = 1000;
        c.server.limits.max_connections_per_addr = Some(4);
    })
}

/// Sends `raw` on a new connection and reads until the server closes it (or 3 s pass); the
/// status of the first response, 0 for none.
fn exchange(addr: std::net::SocketAddr, raw: &[u8], close: bool) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let _ = s.write_all(raw);
    if close {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    text.strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Waits until the log accounted for `n` lines (written or dropped), or 5 s pass.
fn settle(log: &AccessLog, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while log.written() + log.dropped() < n && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Anything more would arrive now.
    std::thread::sleep(Duration::from_millis(100));
}

#[test]
fn one_line_per_request_of_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let log = AccessLog::to_file(&path).unwrap();
    let s = server(&log);
    let addr = s.addr;
    // The client's own count: status → requests sent that got it (0: closed unanswered).
    let mut sent: BTreeMap<u16, u64> = BTreeMap::new();
    let mut count = |status: u16| *sent.entry(status).or_default() += 1;

    for _ in 0..5 {
        count(exchange(
            addr,
            b"GET / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
            false,
        ));
    }
    count(exchange(
        addr,
        b"GET /missing HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
        false,
    ));
    count(exchange(
        addr,
        b"DELETE / HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
        false,
    ));
    count(exchange(addr, b"GET / HTTP/1.1\r\nhost t\r\n\r\n", false));
    count(exchange(
        addr,
        b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 5000\r\n\r\n",
        false,
    ));
    let huge = format!(
        "GET / HTTP/1.1\r\nhost: t\r\nx-big: {}\r\n\r\n",
        "a".repeat(70_000)
    );
    count(exchange(addr, huge.as_bytes(), false));
    // The head never ends: 408 at the header timeout.
    count(exchange(addr, b"GET / HTTP/1.1\r\nhost: t\r\n", false));
    // The body stalls: the handler's read times out (408 from the application).
    count(exchange(
        addr,
        b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 10\r\n\r\nabc",
        false,
    ));
    count(exchange(
        addr,
        b"GET /panic HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
        false,
    ));
    // The client leaves while its handler works: the handler is dropped unanswered (status 0).
    count(exchange(
        addr,
        b"GET /slow HTTP/1.1\r\nhost: t\r\n\r\n",
        true,
    ));
    // Two requests on one keep-alive connection, the second closing it.
    let two = b"GET / HTTP/1.1\r\nhost: t\r\n\r\n\
                GET /missing HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";
    assert_eq!(exchange(addr, two, false), 200);
    count(200);
    count(404);
    // A connection that never sends a request is not a request: no line.
    assert_eq!(exchange(addr, b"", false), 0);
    // Four connections held open fill this address's cap; the fifth is refused unanswered.
    let held: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(100));
    count(exchange(addr, b"GET / HTTP/1.1\r\nhost: t\r\n\r\n", true));
    drop(held);
    std::thread::sleep(Duration::from_millis(400));

    #[cfg(feature = "http2")]
    for status in http2_gets(addr, 3) {
        count(status);
    }

    let total: u64 = sent.values().sum();
    settle(&log, total);
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let mut logged: BTreeMap<u16, u64> = BTreeMap::new();
    for l in &lines {
        *logged
            .entry(l["status"].as_u64().unwrap() as u16)
            .or_default() += 1;
    }
    assert_eq!(
        logged, sent,
        "lines by status vs the client's count:\n{text}"
    );
    assert_eq!((log.written(), log.dropped()), (total, 0));
    for (status, source, reason) in [
        (400, "engine", "bad_request"),
        (431, "engine", "header_too_large"),
        (500, "app", ""),
        (0, "engine", "limit_reached"),
        (404, "app", ""),
    ] {
        assert!(
            lines.iter().any(|l| l["status"] == status
                && l["source"] == source
                && (reason.is_empty() || l["reason"] == reason)),
            "a {status} line from {source} ({reason}):\n{text}"
        );
    }
    let timeouts: Vec<_> = lines.iter().filter(|l| l["status"] == 408).collect();
    assert!(
        timeouts.iter().any(|l| l["reason"] == "header_timeout")
            && timeouts.iter().any(|l| l["source"] == "app"),
        "the header timeout (engine) and the body timeout (app):\n{text}"
    );
}

/// `n` GETs over one h2c connection (prior knowledge); their statuses.
#[cfg(feature = "http2")]
fn http2_gets(addr: std::net::SocketAddr, n: usize) -> Vec<u16> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (send, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(conn);
        let mut send = send.ready().await.unwrap();
        let mut statuses = Vec::new();
        for _ in 0..n {
            let req = http::Request::get("http://t/").body(()).unwrap();
            let (resp, _) = send.send_request(req, true).unwrap();
            let resp = resp.await.unwrap();
            statuses.push(resp.status().as_u16());
            let mut body = resp.into_body();
            while let Some(c) = body.data().await {
                let _ = body.flow_control().release_capacity(c.unwrap().len());
            }
        }
        statuses
    })
}

#[test]
fn a_log_on_a_full_disk_drops_and_counts_lines_and_the_server_keeps_serving() {
    let Some(disk) = SmallDisk::mount(
        "a_log_on_a_full_disk_drops_and_counts_lines_and_the_server_keeps_serving",
        8 * 1024,
    ) else {
        return;
    };
    let log = AccessLog::to_file(disk.join("access.log")).unwrap();
    let s = server(&log);
    let started = Instant::now();
    let n = 300;
    for _ in 0..n {
        let res = s.get("/", &["connection: close"]);
        assert_eq!((res.status, res.text()), (200, "ok"));
    }
    settle(&log, n);
    assert_eq!(log.written() + log.dropped(), n, "every line accounted for");
    assert!(log.written() > 0 && log.dropped() > 0, "{log:?}");
    // Each line whole up to the point the disk filled.
    let text = std::fs::read_to_string(disk.join("access.log")).unwrap();
    let whole = text
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok());
    assert_eq!(whole.count() as u64, log.written());
    eprintln!(
        "full disk: {n} requests served in {:?}, {} lines written, {} dropped",
        started.elapsed(),
        log.written(),
        log.dropped()
    );
}
