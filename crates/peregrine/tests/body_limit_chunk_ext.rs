//! The engine's cap on chunk-extension bytes holds under the framework's body limits: the
//! extensions count against the request's own limit (the application's default, a route's),
//! and beyond the data by at most 64 KiB whatever the limit (none included). Over a real
//! socket: a small body with megabytes of extensions is refused (413, the connection closed),
//! on routes with the default limit, a raised one and none; a body whose data is within the
//! default limit but whose data and extensions are not is refused too; ordinary extensions
//! still pass.

mod common;
use common::TestServer;
use peregrine::{post, App, Error, Request};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

fn app() -> App {
    async fn count(mut req: Request) -> Result<String, Error> {
        Ok(req.bytes().await?.len().to_string())
    }
    App::new()
        .route("/default", post(count))
        .route("/raised", post(count).body_limit(1 << 30))
        .route("/unlimited", post(count).no_body_limit())
        .route("/unread", post(|_req: Request| async { "not read" }))
}

/// A chunked request of `chunks` chunks of 10 data bytes, each size line carrying an
/// extension of `ext_len` bytes (`;e=xxx…`, under the 1 KiB per-line limit).
fn chunked(path: &str, chunks: usize, ext_len: usize) -> Vec<u8> {
    let ext = format!(";e={}", "x".repeat(ext_len - 3));
    let mut req = format!("POST {path} HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .into_bytes();
    for _ in 0..chunks {
        req.extend_from_slice(format!("a{ext}\r\n0123456789\r\n").as_bytes());
    }
    req.extend_from_slice(b"0\r\n\r\n");
    req
}

/// Sends `raw` while reading the answer (the server may answer and close before the request
/// is all written); the status line's code and whether the server then closed. `wait_close`:
/// read on after a complete answer, for up to 5 s, to see the server close.
fn exchange(s: &TestServer, raw: Vec<u8>, wait_close: bool) -> (u16, bool) {
    let conn = TcpStream::connect(s.addr).unwrap();
    let wait = if wait_close { 5 } else { 20 };
    conn.set_read_timeout(Some(Duration::from_secs(wait)))
        .unwrap();
    let mut writer = conn.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        // The server may stop reading and close: a failed write is expected then.
        let _ = writer.write_all(&raw);
    });
    let mut reader = conn;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let closed = loop {
        match reader.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            // A reset after the answer is a close too.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break false,
            Err(e) => panic!("read: {e}"),
        }
        // A complete keep-alive answer: stop waiting for a close that will not come.
        if let Some(end) = find(&got, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if !wait_close
                && len.is_some_and(|n| got.len() >= end + 4 + n)
                && !head.contains("connection: close")
            {
                break false;
            }
        }
    };
    let _ = reader.shutdown(Shutdown::Both);
    sender.join().unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 "), "no answer: {text:?}");
    (text[9..12].parse().unwrap(), closed)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn megabytes_of_chunk_extensions_on_a_small_body_are_refused() {
    let s = TestServer::start(app());
    // 3,000 chunks: 30 KB of data, about 3 MB of extensions.
    for path in ["/default", "/raised", "/unlimited", "/unread"] {
        let (status, closed) = exchange(&s, chunked(path, 3000, 1000), true);
        assert!(
            status == 413 || status == 400 || (path == "/unread" && status == 200),
            "{path}: {status}"
        );
        assert!(closed, "{path}: the connection stays open after {status}");
    }
}

#[test]
fn extensions_count_against_the_default_limit() {
    let s = TestServer::start(App::new().route(
        "/default",
        post(
            |mut req: Request| async move { Ok::<_, Error>(req.bytes().await?.len().to_string()) },
        ),
    ));
    // 600 chunks of 1,000 data bytes, each size line with a 1,000-byte extension: 600 KB of
    // data (within the default 1 MiB), 1.2 MB in all.
    let ext = format!(";e={}", "x".repeat(997));
    let mut req =
        b"POST /default HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..600 {
        req.extend_from_slice(format!("3e8{ext}\r\n").as_bytes());
        req.extend_from_slice(&[b'z'; 1000]);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(exchange(&s, req, true), (413, true));
}

#[test]
fn ordinary_chunk_extensions_still_pass() {
    let s = TestServer::start(app());
    // 3,000 chunks with 16-byte extensions: 30 KB of data, 48 KB of extensions.
    for path in ["/default", "/raised", "/unlimited"] {
        let (status, closed) = exchange(&s, chunked(path, 3000, 16), false);
        assert_eq!((status, closed), (200, false), "{path}");
    }
    // Up to 64 KiB of extensions beyond the data, whatever their size.
    let (status, _) = exchange(&s, chunked("/default", 60, 1000), false);
    assert_eq!(status, 200);
}
