//! The engine serving HTTP/2 on a real socket, h2c (prior knowledge on the plain listener) or
//! over TLS (ALPN `h2`, certificates from `tls_support`), and the h2 crate's client for it;
//! the HTTP/2 resource-limit tests share them. The including test declares `mod common;` and
//! `mod tls_support;` too.
#![allow(dead_code)]

use crate::tls_support::{client_config, Ca};
use bytes::Bytes;
use peregrine_server::h2::Http2Config;
use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
use peregrine_server::{Server, ServerConfig, ServerHandle, Service};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// Cleartext, HTTP/2 with prior knowledge.
    H2c,
    /// TLS 1.3 with ALPN `h2`.
    Tls,
}

/// A running engine (one worker) and what a client needs to reach it.
pub struct Srv {
    pub handle: Option<ServerHandle>,
    pub addr: SocketAddr,
    pub via: Via,
    ca: Option<Ca>,
}

impl Srv {
    /// Stops the server off the test's runtime.
    pub async fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            tokio::task::spawn_blocking(move || h.shutdown())
                .await
                .unwrap();
        }
    }
}

/// A one-worker config on port 0 with the given write and idle timeouts.
pub fn config(write_timeout: Duration, idle_timeout: Duration, h2: Http2Config) -> ServerConfig {
    ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .write_timeout(write_timeout)
        .idle_timeout(idle_timeout)
        .shutdown_timeout(Duration::from_secs(2))
        .http2(h2)
        .build()
}

/// Starts the engine with `service`, reachable `via` h2c or TLS.
pub fn serve<S: Service>(via: Via, config: ServerConfig, service: S) -> Srv {
    match via {
        Via::H2c => {
            let handle = Server::new(config).serve(service).unwrap();
            Srv {
                addr: handle.local_addr(),
                handle: Some(handle),
                via,
                ca: None,
            }
        }
        Via::Tls => {
            let ca = Ca::new("h2limits");
            let leaf = ca.server("srv", &["localhost"]);
            let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
                leaf.cert_path,
                leaf.key_path,
            )]))
            .unwrap();
            let handle = Server::new(config)
                .with_acceptor(acceptor)
                .serve(service)
                .unwrap();
            Srv {
                addr: handle.local_addr(),
                handle: Some(handle),
                via,
                ca: Some(ca),
            }
        }
    }
}

/// An h2 client connection built by `builder`; the task driving it ends with the
/// connection's outcome (a GOAWAY from the server is an error with its reason).
pub async fn connect(
    srv: &Srv,
    builder: &h2::client::Builder,
) -> (
    h2::client::SendRequest<Bytes>,
    JoinHandle<Result<(), h2::Error>>,
) {
    let tcp = TcpStream::connect(srv.addr).await.unwrap();
    match srv.via {
        Via::H2c => {
            let (send, conn) = builder.handshake(tcp).await.unwrap();
            (send, tokio::spawn(conn))
        }
        Via::Tls => {
            let ca = srv.ca.as_ref().unwrap();
            let tls = TlsConnector::from(client_config(
                ca,
                &[b"h2"],
                &[&rustls::version::TLS13],
                None,
            ))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (send, conn) = builder.handshake(tls).await.unwrap();
            (send, tokio::spawn(conn))
        }
    }
}

/// A GET (or HEAD) request for `path`.
pub fn request(method: &str, path: &str) -> http::Request<()> {
    http::Request::builder()
        .method(method)
        .uri(format!("https://localhost{path}"))
        .body(())
        .unwrap()
}

/// Fetches `path` whole: status, headers, body; the body's window is given back as it comes.
pub async fn fetch(
    send: &h2::client::SendRequest<Bytes>,
    method: &str,
    path: &str,
) -> Result<(u16, http::HeaderMap, Bytes, bool), h2::Error> {
    let mut send = send.clone().ready().await?;
    let (resp, _) = send.send_request(request(method, path), true)?;
    let resp = resp.await?;
    let (parts, mut body) = resp.into_parts();
    let ended_with_head = body.is_end_stream();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    Ok((
        parts.status.as_u16(),
        parts.headers,
        Bytes::from(data),
        ended_with_head,
    ))
}

/// This process's resident set, in bytes (`VmRSS` of `/proc/self/status`).
pub fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS in /proc/self/status");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kib * 1024
}

/// A file of `len` bytes (a repeating pattern, so any misplaced byte shows) in a fresh
/// directory; removed by the caller's `TempFile` drop.
pub struct TempFile {
    pub path: std::path::PathBuf,
}

impl TempFile {
    pub fn new(tag: &str, len: usize) -> TempFile {
        let dir = crate::tls_support::temp_dir(tag);
        let path = dir.join("body.bin");
        std::fs::write(&path, pattern(len)).unwrap();
        TempFile { path }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The whole file at `path` as a `ResponseBody::File` response (200).
pub fn whole_file(path: &std::path::Path) -> peregrine_server::Response {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len();
    peregrine_server::Response::new(200).with_body(peregrine_server::ResponseBody::File {
        file,
        offset: 0,
        len,
    })
}

/// `len` bytes where byte i is `i % 251` (a prime, so pieces of any power-of-two size differ).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// How a response the client gives no window to ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// `RST_STREAM`, or a GOAWAY naming the stream, with this reason.
    Reset(h2::Reason),
    /// The server closed the connection (after its GOAWAY) with the stream open.
    ConnectionClosed,
    /// The response ended normally, with this many body bytes.
    Complete(usize),
}

impl End {
    /// Ended by the server's stall rules: `CANCEL` for the stream, or the connection's GOAWAY
    /// (`ENHANCE_YOUR_CALM` or, for an idle close, `NO_ERROR`) and close.
    pub fn by_server(self) -> bool {
        matches!(
            self,
            End::Reset(h2::Reason::CANCEL)
                | End::Reset(h2::Reason::ENHANCE_YOUR_CALM)
                | End::Reset(h2::Reason::NO_ERROR)
                | End::ConnectionClosed
        )
    }
}

fn end_of(e: h2::Error) -> End {
    match e.reason() {
        Some(r) => End::Reset(r),
        None if e.is_io() => End::ConnectionClosed,
        None => panic!("stream failed: {e:?}"),
    }
}

/// Waits for the end of a response the client gives no window to.
pub async fn stream_end(resp: h2::client::ResponseFuture) -> End {
    let mut body = match resp.await {
        Ok(resp) => resp.into_body(),
        Err(e) => return end_of(e),
    };
    let mut n = 0;
    loop {
        match body.data().await {
            Some(Ok(chunk)) => n += chunk.len(),
            Some(Err(e)) => return end_of(e),
            None => return End::Complete(n),
        }
    }
}
