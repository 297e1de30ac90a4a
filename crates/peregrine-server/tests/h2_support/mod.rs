//! An HTTP/2 test server (its own thread and runtime, like a worker) and raw-frame helpers for
//! the flood tests. Uses `tests/common` (the including test declares `mod common;` too).
#![allow(dead_code)]

use crate::common::Iter;
use bytes::Bytes;
use peregrine_server::h2::{serve_connection, Closed, Http2Config};
use peregrine_server::{service_fn, Request, Response, ResponseBody, ServerConfig, Service};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

/// A running test server: where it listens, how each connection ended, how to stop it.
pub struct TestServer {
    pub addr: SocketAddr,
    pub closed: mpsc::Receiver<Closed>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    /// Starts graceful shutdown (GOAWAY on every connection) and waits for the server thread,
    /// off the test's runtime (its clients must keep running to answer).
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            tokio::task::spawn_blocking(move || t.join().unwrap())
                .await
                .unwrap();
        }
    }

    /// The next connection outcome, waiting up to 10 s.
    pub fn next_closed(&self) -> Closed {
        self.closed
            .recv_timeout(Duration::from_secs(10))
            .expect("a connection ended")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Serves HTTP/2 (plaintext, prior knowledge) with `service` on a loopback port.
pub fn start<S: Service>(service: S, config: ServerConfig, h2: Http2Config) -> TestServer {
    start_with(service, config, h2, |tcp| async move { Some(tcp) })
}

/// Like [`start`], with `wrap` turning each TCP connection into the transport (TLS).
pub fn start_with<S, F, Fut, IO>(
    service: S,
    config: ServerConfig,
    h2: Http2Config,
    wrap: F,
) -> TestServer
where
    S: Service,
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Option<IO>> + 'static,
    IO: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let (stop, stop_rx) = watch::channel(false);
    let (closed_tx, closed) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
            let config = Rc::new(config);
            let h2 = Rc::new(h2);
            let wrap = Rc::new(wrap);
            let mut stop_accept = stop_rx.clone();
            let mut conns = Vec::new();
            loop {
                let (tcp, peer) = tokio::select! {
                    r = listener.accept() => r.unwrap(),
                    _ = stop_accept.wait_for(|s| *s) => break,
                };
                let (service, config, h2, closed_tx, wrap) = (
                    service.clone(),
                    config.clone(),
                    h2.clone(),
                    closed_tx.clone(),
                    wrap.clone(),
                );
                let mut stop = stop_rx.clone();
                conns.push(tokio::task::spawn_local(async move {
                    let Some(io) = wrap(tcp).await else { return };
                    let shutdown = async move {
                        let _ = stop.wait_for(|s| *s).await;
                    };
                    let how =
                        serve_connection(io, Bytes::new(), peer, service, &config, &h2, shutdown)
                            .await;
                    let _ = closed_tx.send(how);
                }));
            }
            for c in conns {
                let _ = c.await;
            }
        });
    });
    TestServer {
        addr,
        closed,
        stop,
        thread: Some(thread),
    }
}

/// Handlers started and handlers dropped before finishing (cancelled), across the test's
/// servers that use [`app`] with this counter.
#[derive(Default)]
pub struct Counters {
    pub cancelled: AtomicUsize,
}

struct CancelGuard(Arc<Counters>, bool);
impl Drop for CancelGuard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The test application, the same for HTTP/1.1-style handlers:
/// `/hello` (version and authority), `/echo` (body back), `/stream` (three chunks),
/// `/slow` (answers after 30 s), `/panic`, `/headers` (x-test and cookie values back),
/// `/tunnel-headers` (for an extended CONNECT: switches, writes the cookie and upgrade values on
/// the tunnel and ends it).
pub fn app(counters: Arc<Counters>) -> impl Service {
    service_fn(move |mut req: Request| {
        let counters = counters.clone();
        async move {
            match req.path() {
                "/hello" => Response::text(format!(
                    "hello {:?} {} {}",
                    req.version(),
                    req.method(),
                    req.authority().unwrap_or("-")
                )),
                "/echo" => match req.body_mut().to_bytes(4 * 1024 * 1024).await {
                    Ok(b) => Response::text(b),
                    Err(e) => Response::text(e.to_string()).with_status(e.status()),
                },
                "/stream" => {
                    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                        Ok(Bytes::from_static(b"one ")),
                        Ok(Bytes::from_static(b"two ")),
                        Ok(Bytes::from_static(b"three")),
                    ];
                    Response::new(200)
                        .with_body(ResponseBody::Stream(Box::pin(Iter(chunks.into_iter()))))
                }
                "/slow" => {
                    let mut guard = CancelGuard(counters, false);
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    guard.1 = true;
                    Response::text("slow")
                }
                "/panic" => panic!("handler panic (expected by the test)"),
                "/headers" => Response::text(format!(
                    "{}|{}|{}",
                    String::from_utf8_lossy(req.header("x-test").unwrap_or(b"-")),
                    String::from_utf8_lossy(req.header("cookie").unwrap_or(b"-")),
                    req.query().unwrap_or("-"),
                ))
                .with_header("Connection", b"close".as_slice())
                .with_header("X-Reply", b"yes".as_slice()),
                "/tunnel-headers" => {
                    let seen = format!(
                        "{}|{}",
                        String::from_utf8_lossy(req.header("cookie").unwrap_or(b"-")),
                        String::from_utf8_lossy(req.header("upgrade").unwrap_or(b"-")),
                    );
                    let write: peregrine_server::upgrade::OnUpgrade = Box::new(move |mut io| {
                        Box::pin(async move {
                            let _ = io.write_all(seen.as_bytes()).await;
                            let _ = io.shutdown().await;
                        })
                    });
                    Response::new(101).with_body(ResponseBody::Upgrade(write))
                }
                _ => Response::new(404),
            }
        }
    })
}

/// An h2 client connection (the h2 crate's client) to `addr`.
pub async fn client(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Sends a request and reads the whole response: status, headers, body.
pub async fn fetch(
    send: &mut h2::client::SendRequest<Bytes>,
    req: http::Request<()>,
    body: Option<Bytes>,
) -> Result<(http::StatusCode, http::HeaderMap, Bytes), h2::Error> {
    let mut send = send.clone().ready().await?;
    let (resp, mut stream) = send.send_request(req, body.is_none())?;
    if let Some(b) = body {
        send_all(&mut stream, b).await?;
    }
    let resp = resp.await?;
    let (parts, mut recv) = resp.into_parts();
    let mut data = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    Ok((parts.status, parts.headers, Bytes::from(data)))
}

async fn send_all(stream: &mut h2::SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        stream.reserve_capacity(data.len());
        let n = std::future::poll_fn(|cx| stream.poll_capacity(cx))
            .await
            .expect("capacity")?;
        let piece = data.split_to(n.min(data.len()));
        stream.send_data(piece, data.is_empty())?;
    }
    Ok(())
}

pub fn get(path: &str) -> http::Request<()> {
    http::Request::get(format!("http://localhost{path}"))
        .body(())
        .unwrap()
}

// ---- raw frames ----

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const CONTINUATION: u8 = 0x9;
pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const ACK: u8 = 0x1;

/// One frame: 9-byte header and payload.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK block for `GET <path>` with authority `localhost`, using only the static table and
/// literals without indexing (so blocks do not depend on each other).
pub fn get_block(path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86]; // :method GET, :scheme http
    b.push(0x04); // literal without indexing, name :path
    b.push(path.len() as u8);
    b.extend_from_slice(path.as_bytes());
    b.push(0x01); // literal without indexing, name :authority
    b.push(9);
    b.extend_from_slice(b"localhost");
    b
}

/// A raw frame: type, flags, stream, payload.
#[derive(Debug)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

/// Reads one frame, `None` at end of stream (or on a reset).
pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R) -> Option<Frame> {
    let mut head = [0u8; 9];
    r.read_exact(&mut head).await.ok()?;
    let len = (head[0] as usize) << 16 | (head[1] as usize) << 8 | head[2] as usize;
    let mut payload = vec![0; len];
    r.read_exact(&mut payload).await.ok()?;
    Some(Frame {
        kind: head[3],
        flags: head[4],
        stream: u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff,
        payload,
    })
}

/// Opens a raw connection: preface, empty SETTINGS, waits for the server's SETTINGS and ACKs
/// them (so the server's limits are in force).
pub async fn raw_connect(addr: SocketAddr) -> tokio::net::TcpStream {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(peregrine_server::h2::PREFACE).await.unwrap();
    tcp.write_all(&frame(SETTINGS, 0, 0, &[])).await.unwrap();
    loop {
        let f = read_frame(&mut tcp).await.expect("server SETTINGS");
        if f.kind == SETTINGS && f.flags & ACK == 0 {
            break;
        }
    }
    tcp.write_all(&frame(SETTINGS, ACK, 0, &[])).await.unwrap();
    tcp
}

/// Reads frames until a GOAWAY (its error code) or the end of the connection (`None`),
/// collecting RST_STREAM codes by stream on the way. Bounded by 10 s.
pub async fn until_goaway(
    tcp: &mut tokio::net::TcpStream,
    resets: &mut Vec<(u32, u32)>,
) -> Option<u32> {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(f) = read_frame(tcp).await {
            match f.kind {
                GOAWAY => {
                    return Some(u32::from_be_bytes([
                        f.payload[4],
                        f.payload[5],
                        f.payload[6],
                        f.payload[7],
                    ]))
                }
                RST_STREAM => resets.push((
                    f.stream,
                    u32::from_be_bytes([f.payload[0], f.payload[1], f.payload[2], f.payload[3]]),
                )),
                _ => {}
            }
        }
        None
    })
    .await
    .expect("the server answers within 10 s")
}
