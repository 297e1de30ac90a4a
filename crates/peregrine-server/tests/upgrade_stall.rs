//! An HTTP/1.1 upgrade whose client stops reading: the handler's writes wait within the write
//! rules (`write_timeout`, `write_min_rate` after `write_rate_grace`), then the connection is
//! closed with a reset, the write fails with `TimedOut` and the engine reports a
//! `WriteTimeout` close, instead of the upgrade waiting forever. A client that reads steadily
//! is not cut. Real sockets, plaintext and TLS (tokio-rustls client, ALPN `http/1.1`).
#![cfg(feature = "tls")]

mod tls_support;

use peregrine_server::events::{EngineEvents, RejectReason, Rejection};
use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
use peregrine_server::upgrade::Upgraded;
use peregrine_server::ServerConfigBuilder;
use peregrine_server::{service_fn, Request, Response, ResponseBody, Server, ServerConfig};
use peregrine_server::{ServerHandle, Service};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tls_support::{client_config, Ca};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

/// What the upgrade's handler saw: how its writing ended (`Ok` after writing everything it was
/// asked to), and when.
type Outcome = Arc<Mutex<Option<(io::Result<()>, Instant)>>>;

/// Every request switches (101) to a function that writes `total` bytes (or without end) in
/// 16 KiB pieces and keeps how that ended in `outcome`.
fn app(outcome: Outcome, total: Option<usize>) -> impl Service {
    service_fn(move |_req: Request| {
        let outcome = outcome.clone();
        async move {
            let run = move |mut io: Upgraded| -> Pin<Box<dyn Future<Output = ()>>> {
                Box::pin(async move {
                    let piece = vec![b'w'; 16 * 1024];
                    let mut left = total.unwrap_or(usize::MAX);
                    let ended = loop {
                        if left == 0 {
                            break io.flush().await;
                        }
                        let n = left.min(piece.len());
                        if let Err(e) = io.write_all(&piece[..n]).await {
                            break Err(e);
                        }
                        left -= n;
                    };
                    *outcome.lock().unwrap() = Some((ended, Instant::now()));
                })
            };
            Response::new(101)
                .with_header("Upgrade", b"flood".as_slice())
                .with_body(ResponseBody::Upgrade(Box::new(run)))
        }
    })
}

/// The closes the engine reports.
#[derive(Default)]
struct Closes(Mutex<Vec<(RejectReason, String)>>);

impl EngineEvents for Closes {
    fn rejected(&self, ev: &Rejection<'_>) {
        let mut seen = self.0.lock().unwrap();
        seen.push((ev.reason, ev.detail.to_string()));
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Plain,
    Tls,
}

trait Conn: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Conn for T {}

/// A running engine (one worker) serving `service`, and the CA its TLS certificate is from.
fn serve(
    via: Via,
    config: ServerConfig,
    closes: Arc<Closes>,
    service: impl Service,
) -> (ServerHandle, Option<Ca>) {
    let server = Server::new(config).with_events(closes);
    match via {
        Via::Plain => (server.serve(service).unwrap(), None),
        Via::Tls => {
            let ca = Ca::new("upgrade-stall");
            let leaf = ca.server("srv", &["localhost"]);
            let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
                leaf.cert_path,
                leaf.key_path,
            )]))
            .unwrap();
            let handle = server.with_acceptor(acceptor).serve(service).unwrap();
            (handle, Some(ca))
        }
    }
}

/// Connects with a receive buffer of `rcvbuf` bytes (the kernel doubles it), asks for the
/// upgrade and reads the 101's head, one byte at a time so nothing after it is taken.
async fn upgrade(handle: &ServerHandle, ca: Option<&Ca>, rcvbuf: u32) -> Box<dyn Conn> {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(rcvbuf).unwrap();
    let tcp: TcpStream = socket.connect(handle.local_addr()).await.unwrap();
    let mut conn: Box<dyn Conn> = match ca {
        None => Box::new(tcp),
        Some(ca) => Box::new(
            TlsConnector::from(client_config(
                ca,
                &[b"http/1.1"],
                &[&rustls::version::TLS13],
                None,
            ))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap(),
        ),
    };
    conn.write_all(
        b"GET /flood HTTP/1.1\r\nHost: t\r\nConnection: upgrade\r\nUpgrade: flood\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        conn.read_exact(&mut b).await.unwrap();
        head.push(b[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 101 "), "{head:?}");
    conn
}

/// Waits (at most `guard`) for the handler to report how its writing ended.
async fn ended(outcome: &Outcome, guard: Duration) -> Option<(io::Result<()>, Instant)> {
    let start = Instant::now();
    while start.elapsed() < guard {
        if let Some(done) = outcome.lock().unwrap().take() {
            return Some(done);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

fn config(write_timeout: Duration) -> ServerConfig {
    ServerConfig::builder()
        .addr("127.0.0.1:0".parse().unwrap())
        .workers(1)
        .write_timeout(write_timeout)
        .shutdown_timeout(Duration::from_secs(2))
        .build()
}

async fn stop(handle: ServerHandle) {
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
}

/// The client reads the 101 and nothing more; the handler writes without end.
async fn stops_reading(via: Via) {
    let outcome = Outcome::default();
    let closes = Arc::new(Closes::default());
    let write_timeout = Duration::from_secs(1);
    let (handle, ca) = serve(
        via,
        config(write_timeout),
        closes.clone(),
        app(outcome.clone(), None),
    );
    let mut conn = upgrade(&handle, ca.as_ref(), 4096).await;
    let start = Instant::now();
    let Some((result, at)) = ended(&outcome, Duration::from_secs(15)).await else {
        panic!("{via:?}: the handler still writes to a client that reads nothing after 15 s");
    };
    let err = result.expect_err("the write to a client that reads nothing fails");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{via:?}: {err}");
    let took = at - start;
    // Filling the buffers on loopback takes milliseconds; then one wait of `write_timeout`.
    assert!(took < write_timeout * 5, "{via:?}: failed after {took:?}");
    // Closed: what is still queued for the client reads out (at most its receive buffer and
    // what was in flight), then the connection ends, instead of the handler's bytes flowing
    // again as soon as the client reads.
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match conn.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(n) => got += n,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{via:?}: the connection is still open, {got} bytes read"));
    assert!(got < 8 << 20, "{via:?}: {got} bytes read after the timeout");
    if via == Via::Plain {
        let kind = end.expect_err("closed with a reset").kind();
        assert_eq!(kind, io::ErrorKind::ConnectionReset, "{via:?}");
    }
    let seen = closes.0.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![(RejectReason::WriteTimeout, "write_timeout".to_string())],
        "{via:?}"
    );
    stop(handle).await;
}

#[tokio::test]
async fn an_upgrade_whose_client_stops_reading_is_closed_after_the_write_timeout_plain() {
    stops_reading(Via::Plain).await;
}

#[tokio::test]
async fn an_upgrade_whose_client_stops_reading_is_closed_after_the_write_timeout_tls() {
    stops_reading(Via::Tls).await;
}

/// `write_min_rate` applies too: with a `write_timeout` longer than the test, a client that
/// reads nothing is cut once the waits pass `write_rate_grace` (its allowance for the few
/// bytes it took is nothing next to that).
#[tokio::test]
async fn an_upgrade_whose_client_reads_below_the_minimum_rate_is_closed_after_the_grace() {
    let outcome = Outcome::default();
    let closes = Arc::new(Closes::default());
    let config = ServerConfigBuilder::from(config(Duration::from_secs(60)))
        .write_min_rate(1 << 20)
        .write_rate_grace(Duration::from_secs(1))
        .build();
    let (handle, _) = serve(
        Via::Plain,
        config,
        closes.clone(),
        app(outcome.clone(), None),
    );
    let _conn = upgrade(&handle, None, 4096).await;
    let start = Instant::now();
    let Some((result, at)) = ended(&outcome, Duration::from_secs(15)).await else {
        panic!("the handler still writes to a client that reads nothing after 15 s");
    };
    assert_eq!(result.unwrap_err().kind(), io::ErrorKind::TimedOut);
    let took = at - start;
    assert!(took < Duration::from_secs(5), "failed after {took:?}");
    assert_eq!(closes.0.lock().unwrap()[0].0, RejectReason::WriteTimeout);
    stop(handle).await;
}

/// A client that reads steadily, pausing less than `write_timeout` each time, gets everything,
/// though the handler's writes waited for it longer than `write_timeout` in all (and than
/// `write_rate_grace`): the rules bound each wait, and the waits against what was read.
#[tokio::test]
async fn an_upgrade_whose_client_reads_steadily_is_not_cut() {
    let outcome = Outcome::default();
    let closes = Arc::new(Closes::default());
    let write_timeout = Duration::from_secs(1);
    let config = ServerConfigBuilder::from(config(write_timeout))
        .write_min_rate(256 * 1024)
        .write_rate_grace(write_timeout)
        .build();
    // More than the kernel buffers both ways hold on loopback (a few MiB), so the handler
    // waits for the client most of the time.
    let total = 16 << 20;
    let (handle, _) = serve(
        Via::Plain,
        config,
        closes.clone(),
        app(outcome.clone(), Some(total)),
    );
    let mut conn = upgrade(&handle, None, 128 * 1024).await;
    let start = Instant::now();
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    // About 2.5 MiB/s: 256 KiB, then a 100 ms pause.
    while got < total {
        let round = got + 256 * 1024;
        while got < round.min(total) {
            let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf))
                .await
                .expect("the server keeps sending")
                .unwrap();
            assert!(n > 0, "the connection ended after {got} bytes");
            got += n;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (result, at) = ended(&outcome, Duration::from_secs(5))
        .await
        .expect("the handler finished");
    result.expect("every write of the handler succeeded");
    let held = at - start;
    eprintln!("the handler finished after {held:?}");
    assert!(
        held > write_timeout * 2,
        "the handler finished after {held:?}: the client did not hold it up, nothing was tested"
    );
    assert!(closes.0.lock().unwrap().is_empty());
    stop(handle).await;
}
