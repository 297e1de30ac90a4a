//! Test support: start an app on a real socket, and a small blocking HTTP/1.1 client that
//! shows exactly what went over the wire (headers as sent, chunked bodies decoded).
#![allow(dead_code)]

use peregrine::config::Config;
use peregrine::server::{ServerConfig, ServerHandle};
use peregrine::App;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A gzip body, decompressed.
pub fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// A gzip body, decompressed, as text.
pub fn gunzip_text(b: &[u8]) -> String {
    String::from_utf8(gunzip(b)).unwrap()
}

/// The formatted output of the process's `tracing` subscriber (a `fmt` subscriber at INFO,
/// without colours), for tests that read the access log or the error log.
#[derive(Clone, Default)]
pub struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl LogCapture {
    /// Installs the subscriber, writing here. Once per test binary: the subscriber is global.
    pub fn install() -> LogCapture {
        let capture = LogCapture::default();
        let sink = capture.clone();
        tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .init();
        capture
    }

    /// Everything logged so far (a line being written may be cut short).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Write for LogCapture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

pub struct TestServer {
    handle: Option<ServerHandle>,
    pub addr: SocketAddr,
}

impl TestServer {
    pub fn start(app: App) -> Self {
        Self::start_with(app, |_| {})
    }

    pub fn start_with(app: App, tweak: impl FnOnce(&mut Config)) -> Self {
        let mut cfg = Config::from(
            ServerConfig::builder()
                .addr("127.0.0.1:0".parse().unwrap())
                .workers(1)
                .shutdown_timeout(Duration::from_secs(2))
                .build(),
        );
        tweak(&mut cfg);
        let handle = app.serve(cfg).expect("server starts");
        let addr = handle.local_addr();
        TestServer {
            handle: Some(handle),
            addr,
        }
    }

    /// A client for a server started elsewhere (not shut down on drop).
    pub fn attach(addr: SocketAddr) -> Self {
        TestServer { handle: None, addr }
    }

    pub fn connect(&self) -> Conn {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
        }
    }

    /// One request on a fresh connection.
    pub fn send(&self, raw: &str) -> Resp {
        self.send_bytes(raw.as_bytes(), raw.starts_with("HEAD "))
    }

    pub fn send_bytes(&self, raw: &[u8], head: bool) -> Resp {
        let mut c = self.connect();
        c.write(raw);
        c.read(head)
    }

    /// `GET path` with extra header lines (each `Name: value`).
    pub fn get(&self, path: &str, headers: &[&str]) -> Resp {
        self.send(&request("GET", path, headers, ""))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.shutdown();
        }
    }
}

/// Builds a request with Host, the given header lines, and Content-Length if there is a body.
pub fn request(method: &str, path: &str, headers: &[&str], body: &str) -> String {
    let mut s = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for h in headers {
        s.push_str(h);
        s.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" || method == "PUT" {
        s.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    s.push_str("\r\n");
    s.push_str(body);
    s
}

pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub chunked: bool,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("utf-8 body")
    }
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }
    /// Checks a problem document: content type, status member equal to the status, and the
    /// given title.
    pub fn assert_problem(&self, status: u16, title: &str) -> serde_json::Value {
        assert_eq!(
            self.status,
            status,
            "status; body: {:?}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let j = self.json();
        assert_eq!(j["type"], "about:blank");
        assert_eq!(j["title"], title);
        assert_eq!(j["status"], status);
        j
    }
}

impl Conn {
    pub fn write(&mut self, raw: &[u8]) {
        self.w.write_all(raw).expect("write");
    }

    /// Reads one response. `head`: the request was HEAD (no body follows).
    pub fn read(&mut self, head: bool) -> Resp {
        let mut line = String::new();
        self.r.read_line(&mut line).expect("status line");
        assert!(line.starts_with("HTTP/1.1 "), "bad status line {line:?}");
        let status: u16 = line[9..12].parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let mut l = String::new();
            self.r.read_line(&mut l).expect("header line");
            let l = l.trim_end_matches("\r\n");
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').expect("header colon");
            headers.push((n.to_owned(), v.trim().to_owned()));
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(n, _): &&(String, String)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        let chunked = find("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let no_body = head || status == 204 || status == 304 || (100..200).contains(&status);
        if no_body {
        } else if chunked {
            loop {
                let mut size = String::new();
                self.r.read_line(&mut size).unwrap();
                let n =
                    usize::from_str_radix(size.trim_end().split(';').next().unwrap(), 16).unwrap();
                if n == 0 {
                    let mut end = String::new();
                    self.r.read_line(&mut end).unwrap();
                    break;
                }
                let mut chunk = vec![0; n + 2];
                self.r.read_exact(&mut chunk).unwrap();
                body.extend_from_slice(&chunk[..n]);
            }
        } else if let Some(len) = find("content-length") {
            let mut b = vec![0; len.parse().unwrap()];
            self.r.read_exact(&mut b).unwrap();
            body = b;
        }
        Resp {
            status,
            headers,
            body,
            chunked,
        }
    }
}
