//! Shared helpers for the socket tests: a test service, a server on port 0, and a small
//! blocking HTTP/1.1 client that reads responses exactly (framing checked, nothing skipped).
#![allow(dead_code)]

use bytes::Bytes;
use peregrine_server::{
    service_fn, Request, Response, ResponseBody, Server, ServerConfig, ServerHandle, Service,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a client waits for bytes before the test fails (never a timing assertion: only a
/// guard against hanging forever).
pub const CLIENT_WAIT: Duration = Duration::from_secs(10);

/// A config for tests: one worker, port 0, short timeouts.
pub fn config() -> ServerConfig {
    ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .header_timeout(Duration::from_millis(300))
        .body_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_millis(500))
        .write_timeout(Duration::from_millis(500))
        .shutdown_timeout(Duration::from_secs(5))
        .max_body_size(64 * 1024)
        .build()
}

/// Counts handler invocations.
#[derive(Clone, Default)]
pub struct Calls(pub Arc<AtomicUsize>);

impl Calls {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// The test service: routes by path.
pub fn service(calls: Calls) -> impl Service {
    service_fn(move |mut req: Request| {
        calls.0.fetch_add(1, Ordering::SeqCst);
        async move {
            let path = req.path().to_string();
            match path.as_str() {
                "/plaintext" => Response::text("Hello, World!"),
                "/echo" => match req.body_mut().to_bytes(1 << 20).await {
                    Ok(b) => Response::text(b),
                    Err(e) => Response::text(e.to_string()).with_status(e.status()),
                },
                "/echo-stream" => {
                    let body = req.take_body();
                    let stream = futures_stream(body);
                    Response::new(200).with_body(ResponseBody::Stream(stream))
                }
                "/ignore" => Response::text("ignored"),
                "/panic" => panic!("handler panics on purpose"),
                "/slow" => {
                    tokio::time::sleep(Duration::from_millis(700)).await;
                    Response::text("slow done")
                }
                "/big" => Response::text(Bytes::from(vec![b'x'; 256 * 1024])),
                "/stream" => {
                    let n: usize = req.query().and_then(|q| q.parse().ok()).unwrap_or(3);
                    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..n)
                        .map(|i| Ok(Bytes::from(format!("chunk{i};"))))
                        .collect();
                    Response::new(200)
                        .with_body(ResponseBody::Stream(Box::pin(Iter(chunks.into_iter()))))
                }
                "/204" => Response::new(204),
                "/304" => Response::new(304),
                "/target" => Response::text(format!(
                    "{} {} {:?} {:?}",
                    req.method(),
                    req.target(),
                    req.query(),
                    req.authority()
                )),
                "/header" => Response::text(
                    req.header("x-test")
                        .map(|v| v.to_vec())
                        .unwrap_or_else(|| b"none".to_vec()),
                ),
                "/bad-header" => {
                    Response::text("x").with_header("X-Evil", b"a\r\nInjected: 1".to_vec())
                }
                "/close" => Response::text("bye").with_header("Connection", b"close".as_slice()),
                _ => Response::text("Not Found").with_status(404),
            }
        }
    })
}

/// A stream over an iterator (tests only; avoids a dependency on `futures`).
pub struct Iter<I>(pub I);

impl<I: Iterator<Item = Result<Bytes, std::io::Error>> + Unpin> futures_core::Stream for Iter<I> {
    type Item = Result<Bytes, std::io::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.next())
    }
}

/// Streams a request body back as a response body.
fn futures_stream(body: peregrine_server::Body) -> peregrine_server::response::BodyStream {
    type Next = std::pin::Pin<
        Box<dyn std::future::Future<Output = (peregrine_server::Body, Option<Bytes>)>>,
    >;
    struct S {
        fut: Option<Next>,
    }
    fn next(mut body: peregrine_server::Body) -> Next {
        Box::pin(async move {
            let c = body.chunk().await.ok().flatten();
            (body, c)
        })
    }
    impl futures_core::Stream for S {
        type Item = Result<Bytes, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            let Some(fut) = self.fut.as_mut() else {
                return std::task::Poll::Ready(None);
            };
            match fut.as_mut().poll(cx) {
                std::task::Poll::Pending => std::task::Poll::Pending,
                std::task::Poll::Ready((body, Some(c))) => {
                    self.fut = Some(next(body));
                    std::task::Poll::Ready(Some(Ok(c)))
                }
                std::task::Poll::Ready((_, None)) => {
                    self.fut = None;
                    std::task::Poll::Ready(None)
                }
            }
        }
    }
    Box::pin(S {
        fut: Some(next(body)),
    })
}

/// Starts the test service with `cfg`.
pub fn start(cfg: ServerConfig) -> (ServerHandle, Calls) {
    let calls = Calls::default();
    let handle = Server::new(cfg)
        .serve(service(calls.clone()))
        .expect("serve");
    (handle, calls)
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(CLIENT_WAIT)).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// A parsed response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The body was chunked.
    pub chunked: bool,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn body_str(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap()
    }
    pub fn closes(&self) -> bool {
        self.header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
    }
}

/// A client reading responses from a connection, keeping unread bytes between calls.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Client {
            stream: connect(addr),
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Reads more bytes; `false` at EOF (or reset).
    fn more(&mut self) -> bool {
        let mut tmp = [0u8; 16384];
        match self.stream.read(&mut tmp) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                true
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("no bytes from the server within {CLIENT_WAIT:?}")
            }
            Err(_) => false,
        }
    }

    fn take_line(&mut self) -> Option<String> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8(self.buf[..i].to_vec()).unwrap();
                self.buf.drain(..i + 2);
                return Some(line);
            }
            if !self.more() {
                return None;
            }
        }
    }

    fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        while self.buf.len() < n {
            if !self.more() {
                return None;
            }
        }
        Some(self.buf.drain(..n).collect())
    }

    /// Reads one response to a request with method `method`; `None` if the connection ended
    /// before a status line.
    pub fn read_response_for(&mut self, method: &str) -> Option<Resp> {
        let status_line = self.take_line()?;
        let mut parts = status_line.splitn(3, ' ');
        assert_eq!(
            parts.next(),
            Some("HTTP/1.1"),
            "status line {status_line:?}"
        );
        let status: u16 = parts.next().unwrap().parse().unwrap();
        let mut headers = Vec::new();
        loop {
            let line = self.take_line().expect("EOF inside response head");
            if line.is_empty() {
                break;
            }
            let (n, v) = line.split_once(':').expect("header line");
            headers.push((n.to_string(), v.trim().to_string()));
        }
        let mut resp = Resp {
            status,
            headers,
            body: Vec::new(),
            chunked: false,
        };
        let cl = resp
            .header("content-length")
            .map(|v| v.parse::<usize>().unwrap());
        let te = resp.header("transfer-encoding").map(str::to_string);
        assert!(
            !(cl.is_some() && te.is_some()),
            "both Content-Length and Transfer-Encoding"
        );
        if method == "HEAD" || status == 204 || status == 304 || status < 200 {
            return Some(resp);
        }
        if let Some(te) = te {
            assert_eq!(te, "chunked");
            resp.chunked = true;
            loop {
                let size = usize::from_str_radix(&self.take_line().expect("chunk size"), 16)
                    .expect("hex chunk size");
                if size == 0 {
                    assert_eq!(self.take_line().as_deref(), Some(""), "end of chunked body");
                    break;
                }
                resp.body.extend(self.take_exact(size).expect("chunk data"));
                assert_eq!(self.take_line().as_deref(), Some(""), "CRLF after chunk");
            }
        } else if let Some(n) = cl {
            resp.body = self
                .take_exact(n)
                .expect("body shorter than Content-Length");
        } else {
            // Close-delimited.
            while self.more() {}
            resp.body = std::mem::take(&mut self.buf);
        }
        Some(resp)
    }

    pub fn read_response(&mut self) -> Resp {
        self.read_response_for("GET")
            .expect("connection closed before a response")
    }

    /// `true` if the server closed the connection with nothing more to read.
    pub fn at_eof(&mut self) -> bool {
        self.buf.is_empty() && !self.more()
    }
}

/// A slow reader: 32 KiB every 50 ms until the server closes the connection (`true`) or `guard`
/// has passed (`false`; a guard against running for ever, never a timing assertion on the
/// server), with the bytes read. Panics if the server stalls without closing.
pub fn read_slowly(s: &mut TcpStream, guard: Duration) -> (bool, usize) {
    let started = std::time::Instant::now();
    let mut total = 0usize;
    let mut buf = vec![0u8; 32 * 1024];
    let ended = loop {
        if started.elapsed() > guard {
            break false;
        }
        match s.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => total += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("the server stalled without closing")
            }
            Err(_) => break true,
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (ended, total)
}

/// `GET path` with Host.
pub fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").into_bytes()
}
