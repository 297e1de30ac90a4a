//! `App::run_until` / `App::serve` with TLS in the configuration, over real sockets: a rustls
//! client (tokio-rustls) trusting a throwaway CA made with rcgen, the h2 crate's client for
//! HTTP/2 after ALPN, and a hand-written HTTP/1.1 request for the `http/1.1` side.

#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

use peregrine::config::Config;
use peregrine::tls::{CertificateFiles, TlsConfig};
use peregrine::{get, App, Request};
use std::net::SocketAddr;
use std::time::Duration;
use tls_support::{client_config, Ca};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

const WAIT: Duration = Duration::from_secs(10);

/// A port free right now (run_until binds it itself and does not say which it got).
fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `/` answers with the protocol version the request came in; `/slow` takes 500 ms first (an
/// in-flight request for the graceful shutdown).
fn app() -> App {
    App::new()
        .route(
            "/",
            get(|req: Request| async move { format!("{:?}", req.version()) }),
        )
        .route(
            "/slow",
            get(|_req: Request| async {
                tokio::time::sleep(Duration::from_millis(500)).await;
                "finished"
            }),
        )
}

/// TLS settings for `localhost` with a leaf of `ca`.
fn tls_config(ca: &Ca, file: &str) -> (TlsConfig, tls_support::Leaf) {
    let leaf = ca.server(file, &["localhost"]);
    let tls = TlsConfig::new(vec![CertificateFiles::new(&leaf.cert_path, &leaf.key_path)]);
    (tls, leaf)
}

fn config(addr: SocketAddr, tls: TlsConfig) -> Config {
    let server = peregrine::ServerConfig::builder()
        .addr(addr)
        .workers(1)
        .shutdown_timeout(Duration::from_secs(5))
        .build();
    Config::new(server).with_tls(tls)
}

/// A TLS connection offering `alpn`, trusting only `ca`; retried while the server starts.
async fn connect(addr: SocketAddr, ca: &Ca, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let tcp = tokio::time::timeout(WAIT, async {
        loop {
            match TcpStream::connect(addr).await {
                Ok(tcp) => return tcp,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    })
    .await
    .expect("the server listens within 10 s");
    let config = client_config(ca, alpn, &[&rustls::version::TLS13], None);
    TlsConnector::from(config)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("TLS handshake with the test CA's certificate")
}

fn alpn_of(tls: &TlsStream<TcpStream>) -> Vec<u8> {
    tls.get_ref().1.alpn_protocol().unwrap_or_default().to_vec()
}

/// `GET path` over HTTP/1.1 on `tls`: the whole response as text.
async fn h1_get(mut tls: TlsStream<TcpStream>, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, tls.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// `GET path` over HTTP/2 (the h2 crate's client) on `tls`: status and body.
async fn h2_get(tls: TlsStream<TcpStream>, path: &str) -> (u16, String) {
    let (mut send, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("https://localhost{path}"))
        .body(())
        .unwrap();
    let (resp, _) = send.send_request(req, true).unwrap();
    let resp = tokio::time::timeout(WAIT, resp).await.unwrap().unwrap();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut all = Vec::new();
    while let Some(chunk) = tokio::time::timeout(WAIT, body.data()).await.unwrap() {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        all.extend_from_slice(&chunk);
    }
    (status, String::from_utf8(all).unwrap())
}

/// The listener of `App::run_until` speaks TLS from the config alone: h2 for a client that
/// offers it, HTTP/1.1 for one that offers only `http/1.1`; when the future resolves, the
/// request in flight still gets its answer, `run_until` returns, and the port is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_serves_h2_and_http11_by_alpn_then_stops_gracefully() {
    let ca = Ca::new("run-until");
    let (tls, _leaf) = tls_config(&ca, "localhost");
    let addr = free_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app().run_until(config(addr, tls), async {
        let _ = stopped.await;
    }));

    let h2 = connect(addr, &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(alpn_of(&h2), b"h2");
    assert_eq!(h2_get(h2, "/").await, (200, "Http2".to_string()));

    let h1 = connect(addr, &ca, &[b"http/1.1"]).await;
    assert_eq!(alpn_of(&h1), b"http/1.1");
    let resp = h1_get(h1, "/").await;
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with("\r\n\r\nHttp11"), "{resp}");

    // A slow request is in flight when the shutdown future resolves.
    let slow = connect(addr, &ca, &[b"http/1.1"]).await;
    let in_flight = tokio::spawn(h1_get(slow, "/slow"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    stop.send(()).unwrap();
    let resp = in_flight.await.unwrap();
    assert!(resp.starts_with("HTTP/1.1 200 OK\r\n"), "{resp}");
    assert!(resp.ends_with("finished"), "{resp}");
    tokio::time::timeout(WAIT, server)
        .await
        .expect("run_until returns after the drain")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the listener is closed once run_until returns"
    );
}

/// While `run_until` waits, SIGHUP reads the certificate files again: a handshake after it
/// presents the new certificate, on the same listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_certificates_while_run_until_waits() {
    let ca = Ca::new("sighup");
    let (tls, first) = tls_config(&ca, "localhost");
    let addr = free_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(app().run_until(config(addr, tls), async {
        let _ = stopped.await;
    }));
    let presented =
        |tls: &TlsStream<TcpStream>| tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let before = connect(addr, &ca, &[b"h2"]).await;
    assert_eq!(presented(&before), first.der);
    // Closed now: a TLS connection that never sends the HTTP/2 preface would hold the drain at
    // the end until the shutdown timeout.
    drop(before);

    // Renewed in place (as certbot does), then SIGHUP to this process.
    let renewed = ca.server("renewed", &["localhost"]);
    std::fs::copy(&renewed.cert_path, &first.cert_path).unwrap();
    std::fs::copy(&renewed.key_path, &first.key_path).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let after = connect(addr, &ca, &[b"h2"]).await;
        if presented(&after) == renewed.der {
            assert_eq!(h2_get(after, "/").await, (200, "Http2".to_string()));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reload within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// A key file that is not there stops `serve` before any worker starts, naming the file.
#[test]
fn a_missing_key_file_is_a_clear_error() {
    let ca = Ca::new("missing-key");
    let leaf = ca.server("localhost", &["localhost"]);
    let missing = ca.dir.join("no-such.key");
    let tls = TlsConfig::new(vec![CertificateFiles::new(&leaf.cert_path, &missing)]);
    let err = app()
        .serve(config(free_addr(), tls))
        .expect_err("no key, no server");
    let text = err.to_string();
    assert!(text.contains("private key file"), "{text}");
    assert!(text.contains(&missing.display().to_string()), "{text}");
}

/// `App::serve` with TLS returns a running HTTPS server (h2 by ALPN) and its handle stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_with_tls_returns_a_running_https_server() {
    let ca = Ca::new("serve");
    let (tls, _leaf) = tls_config(&ca, "localhost");
    let mut config = config("127.0.0.1:0".parse().unwrap(), tls);
    config.server.workers = 2;
    let handle = tokio::task::spawn_blocking(move || app().serve(config))
        .await
        .unwrap()
        .unwrap();
    let addr = handle.local_addr();
    let tls = connect(addr, &ca, &[b"h2", b"http/1.1"]).await;
    assert_eq!(h2_get(tls, "/").await, (200, "Http2".to_string()));
    tokio::task::spawn_blocking(move || handle.shutdown())
        .await
        .unwrap();
    assert!(TcpStream::connect(addr).await.is_err());
}
