//! The response rules HTTP/1.1 and HTTP/2 share, checked over real sockets against one engine
//! server: every byte 0x00–0xFF in a response field value and in a field name, and the statuses
//! (and HEAD) that carry no body although the handler gave one. Each case goes out over
//! HTTP/1.1 (a raw TCP client reading the exact bytes) and over h2c (the `h2` crate's client),
//! and both must give the same outcome: accepted, the byte arrives as sent; refused, 500 on
//! both, with the same log line (captured from a real `tracing` subscriber; the subscriber is
//! process-wide, hence this file's own binary).
//!
//! The expected sets are written out from RFC 9110 here, not taken from the codec, so the test
//! also checks the codec's rule.
#![cfg(feature = "http2")]

use bytes::Bytes;
use peregrine_server::{service_fn, Request, Response, Server, ServerConfig, ServerHandle};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The log lines the server writes, from a real subscriber installed once for the binary.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture = Capture::default();
        let sink = capture.clone();
        tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .without_time()
            .with_max_level(tracing::Level::WARN)
            .init();
        capture
    })
}

impl Capture {
    /// The captured lines that contain every one of `needles`.
    fn lines_with(&self, needles: &[&str]) -> Vec<String> {
        let out = String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned();
        out.lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .collect()
    }
}

/// RFC 9110 §5.5: field-vchar, SP, HTAB and obs-text; no other control, no DEL.
fn rfc_value_byte(b: u8) -> bool {
    b == b'\t' || b == b' ' || (0x21..=0x7E).contains(&b) || b >= 0x80
}

/// RFC 9110 §5.6.2: `tchar`.
fn rfc_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The byte a request's query names, in hex (`?7f`).
fn query_byte(req: &Request) -> u8 {
    u8::from_str_radix(req.query().unwrap_or(""), 16).unwrap()
}

/// The field name probed for byte `b`: `x-<b>y`. Names are `str`, so a byte from 0x80 up is
/// the character U+0080–U+00FF (two bytes in UTF-8, neither a `tchar`).
fn probe_name(b: u8) -> String {
    format!("x-{}y", char::from(b))
}

fn start() -> (ServerHandle, SocketAddr) {
    let config = ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .build();
    let service = service_fn(|req: Request| async move {
        match req.path() {
            // The byte between two letters, so no client trims it as edge whitespace.
            "/value" => {
                Response::text("ok").with_header("x-probe", vec![b'a', query_byte(&req), b'z'])
            }
            "/name" => Response::text("ok").with_header(probe_name(query_byte(&req)), "v"),
            // A status that forbids a body, with a body anyway (the status in decimal).
            "/no-body" => {
                let status = req.query().unwrap().parse().unwrap();
                Response::text("a body the status forbids").with_status(status)
            }
            _ => Response::text("a body HEAD leaves out"),
        }
    });
    let handle = Server::new(config).serve(service).expect("serve");
    let addr = handle.local_addr();
    (handle, addr)
}

/// One response as an HTTP/1.1 client sees it: status, raw header lines, raw body.
struct H1 {
    status: u16,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

impl H1 {
    fn field(&self, name: &[u8]) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
}

/// Sends `method path` over a fresh HTTP/1.1 connection with `Connection: close` and reads
/// to EOF: every byte the server wrote, head and body, nothing skipped or decoded.
fn h1(addr: SocketAddr, method: &str, path: &str) -> H1 {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    let head = &raw[..end];
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().unwrap();
    let status = std::str::from_utf8(&status_line[9..12])
        .unwrap()
        .parse()
        .unwrap();
    let fields = lines
        .map(|l| {
            let colon = l.iter().position(|&b| b == b':').expect("a field line");
            let value = l[colon + 1..].strip_prefix(b" ").unwrap_or(&l[colon + 1..]);
            (l[..colon].to_vec(), value.to_vec())
        })
        .collect();
    H1 {
        status,
        fields,
        body: raw[end + 4..].to_vec(),
    }
}

/// Sends a request over the h2 connection and reads the whole response.
async fn h2(
    c: &mut h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
) -> (u16, http::HeaderMap, Bytes) {
    let req = http::Request::builder()
        .method(method)
        .uri(format!("http://t{path}"))
        .body(())
        .unwrap();
    let mut send = c.clone().ready().await.unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let (parts, mut recv) = resp.await.unwrap().into_parts();
    let mut body = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        let _ = recv.flow_control().release_capacity(chunk.len());
        body.extend_from_slice(&chunk);
    }
    (parts.status.as_u16(), parts.headers, Bytes::from(body))
}

/// An h2c (prior knowledge) client connection to the same server.
async fn h2_client(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Stops the server off the test's runtime, whose h2 client task must keep running to see the
/// server's GOAWAY.
async fn stop(srv: ServerHandle) {
    tokio::task::spawn_blocking(move || srv.shutdown())
        .await
        .unwrap();
}

/// Runs the blocking HTTP/1.1 client off the test's runtime.
async fn h1_async(addr: SocketAddr, method: &'static str, path: String) -> H1 {
    tokio::task::spawn_blocking(move || h1(addr, method, &path))
        .await
        .unwrap()
}

#[tokio::test]
async fn every_byte_in_a_field_value_has_the_same_outcome_on_http1_and_http2() {
    let logs = capture();
    let (srv, addr) = start();
    let mut c = h2_client(addr).await;
    let mut refused = 0;
    for b in 0..=255u8 {
        let path = format!("/value?{b:02x}");
        let one = h1_async(addr, "GET", path.clone()).await;
        let (two_status, two_fields, _) = h2(&mut c, "GET", &path).await;
        let sent = [b'a', b, b'z'];
        if rfc_value_byte(b) {
            assert_eq!((one.status, two_status), (200, 200), "{b:#04x}");
            assert_eq!(one.field(b"x-probe"), Some(&sent[..]), "HTTP/1.1 {b:#04x}");
            assert_eq!(
                two_fields.get("x-probe").map(|v| v.as_bytes()),
                Some(&sent[..]),
                "HTTP/2 {b:#04x}"
            );
        } else {
            refused += 1;
            assert_eq!((one.status, two_status), (500, 500), "{b:#04x}");
            assert!(one.field(b"x-probe").is_none() && !two_fields.contains_key("x-probe"));
        }
    }
    assert_eq!(refused, 32, "NUL..US but HTAB, and DEL");
    stop(srv).await;
    // Each refusal logged one line, the same text from both drivers.
    let lines = logs.lines_with(&["field=\"x-probe\"", "field value"]);
    assert_eq!(lines.len(), 2 * refused, "{lines:#?}");
    assert!(lines.iter().all(|l| l == &lines[0]), "{lines:#?}");
    assert!(
        lines[0].contains("ERROR") && lines[0].contains("answering 500"),
        "{}",
        lines[0]
    );
}

#[tokio::test]
async fn every_byte_in_a_field_name_has_the_same_outcome_on_http1_and_http2() {
    let logs = capture();
    let (srv, addr) = start();
    let mut c = h2_client(addr).await;
    let mut refused = 0;
    for b in 0..=255u8 {
        let path = format!("/name?{b:02x}");
        let name = probe_name(b);
        let one = h1_async(addr, "GET", path.clone()).await;
        let (two_status, two_fields, _) = h2(&mut c, "GET", &path).await;
        if rfc_tchar(b) {
            assert_eq!((one.status, two_status), (200, 200), "{b:#04x}");
            // HTTP/1.1 keeps the name's case; HTTP/2 names are lowercase (RFC 9113 §8.2.1).
            assert!(
                one.fields
                    .iter()
                    .any(|(n, v)| n == name.as_bytes() && v == b"v"),
                "HTTP/1.1 {b:#04x}"
            );
            let lower = name.to_ascii_lowercase();
            assert_eq!(
                two_fields.get(&lower).map(|v| v.as_bytes()),
                Some(&b"v"[..]),
                "HTTP/2 {b:#04x}"
            );
        } else {
            refused += 1;
            assert_eq!((one.status, two_status), (500, 500), "{b:#04x}");
        }
    }
    assert_eq!(refused, 256 - 77, "77 tchars");
    stop(srv).await;
    let lines = logs.lines_with(&["field=\"x-", "field name"]);
    assert_eq!(lines.len(), 2 * refused, "{lines:#?}");
    // One line per refused name, and the HTTP/1.1 and HTTP/2 lines for it identical.
    for b in (0..=255u8).filter(|&b| !rfc_tchar(b)) {
        let field = format!("field={:?}", probe_name(b));
        let same: Vec<_> = lines.iter().filter(|l| l.contains(&field)).collect();
        assert_eq!(same.len(), 2, "{b:#04x}: {same:#?}");
        assert_eq!(same[0], same[1], "{b:#04x}");
    }
}

#[tokio::test]
async fn statuses_without_a_body_and_head_send_none_on_http1_and_http2() {
    capture();
    let (srv, addr) = start();
    let mut c = h2_client(addr).await;
    // 1xx as a final status is refused on both (500); 204 and 304 go out without the body.
    for (status, wire) in [(100, 500), (103, 500), (199, 500), (204, 204), (304, 304)] {
        let path = format!("/no-body?{status}");
        let one = h1_async(addr, "GET", path.clone()).await;
        let (two_status, two_fields, two_body) = h2(&mut c, "GET", &path).await;
        assert_eq!((one.status, two_status), (wire, wire), "{status}");
        if wire != 500 {
            // Not a byte of the body after the head (read to EOF), no framing line.
            assert!(one.body.is_empty(), "HTTP/1.1 {status}: {:?}", one.body);
            assert!(
                one.field(b"content-length").is_none() && one.field(b"transfer-encoding").is_none()
            );
            assert!(two_body.is_empty(), "HTTP/2 {status}");
            assert!(
                !two_fields.contains_key("content-length"),
                "HTTP/2 {status}"
            );
        }
    }
    // HEAD: the length GET would have, no body bytes.
    let one = h1_async(addr, "HEAD", "/".to_string()).await;
    let (two_status, two_fields, two_body) = h2(&mut c, "HEAD", "/").await;
    assert_eq!((one.status, two_status), (200, 200));
    let len = "a body HEAD leaves out".len().to_string();
    assert_eq!(one.field(b"content-length"), Some(len.as_bytes()));
    assert_eq!(two_fields["content-length"], len.as_str());
    assert!(one.body.is_empty() && two_body.is_empty());
    // Both carry an IMF-fixdate `Date` (`Sun, 06 Nov 1994 08:49:37 GMT`) from the codec's cache.
    for date in [one.field(b"date").unwrap(), two_fields["date"].as_bytes()] {
        assert_eq!(date.len(), 29, "{date:?}");
        assert!(date[3] == b',' && date.ends_with(b" GMT"), "{date:?}");
    }
    stop(srv).await;
}
