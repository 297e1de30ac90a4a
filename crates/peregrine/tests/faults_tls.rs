//! A certificate reload with broken files, on SIGHUP, while clients keep connecting over TLS
//! (`App::run_until` with TLS, rustls clients trusting a throwaway CA): every handshake
//! succeeds with the old certificate, each failed reload is logged as an error, and a good
//! file afterwards is served from the next handshake on.
#![cfg(feature = "tls")]

#[path = "../../peregrine-server/tests/tls_support/mod.rs"]
mod tls_support;

mod common;

use common::LogCapture;
use peregrine::config::Config;
use peregrine::tls::{CertificateFiles, TlsConfig};
use peregrine::{get, App, Request};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tls_support::{client_config, Ca};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls::{self, pki_types::CertificateDer, pki_types::ServerName};
use tokio_rustls::TlsConnector;

const WAIT: Duration = Duration::from_secs(10);

/// What the clients saw: handshakes and requests that worked, ones that failed, and the
/// certificate the last handshake presented.
#[derive(Default)]
struct Seen {
    ok: AtomicU64,
    failed: AtomicU64,
    last: std::sync::Mutex<Option<CertificateDer<'static>>>,
}

/// One TLS connection, one `GET /`; the certificate presented.
async fn one(
    addr: SocketAddr,
    client: Arc<rustls::ClientConfig>,
) -> std::io::Result<CertificateDer<'static>> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").unwrap();
    let mut tls = TlsConnector::from(client).connect(name, tcp).await?;
    let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    tls.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut out = Vec::new();
    tls.read_to_end(&mut out).await?;
    if !out.starts_with(b"HTTP/1.1 200 OK\r\n") || !out.ends_with(b"\r\n\r\nok") {
        return Err(std::io::Error::other(
            String::from_utf8_lossy(&out).into_owned(),
        ));
    }
    Ok(cert)
}

fn sighup() {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until the log holds `n` occurrences of `text`.
async fn logged(log: &LogCapture, text: &str, n: usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while log.text().matches(text).count() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{n} × {text:?} within 10 s:\n{}",
            log.text()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_reload_under_load_keeps_the_old_certificate_and_drops_no_handshake() {
    let log = LogCapture::install();
    let ca = Ca::new("broken-reload");
    let old = ca.server("old", &["localhost"]);
    let files = CertificateFiles::new(ca.dir.join("live.crt"), ca.dir.join("live.key"));
    std::fs::copy(&old.cert_path, &files.cert).unwrap();
    std::fs::copy(&old.key_path, &files.key).unwrap();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let server_config = peregrine::ServerConfig::builder()
        .addr(addr)
        .workers(2)
        .shutdown_timeout(Duration::from_secs(5))
        .build();
    let config = Config::new(server_config).with_tls(TlsConfig::new(vec![files.clone()]));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let app = App::new().route("/", get(|_r: Request| async { "ok" }));
    let server = tokio::spawn(app.run_until(config, async {
        let _ = stopped.await;
    }));
    // Full handshakes only: a resumed session presents no certificate (the client reports
    // the one of the session it resumed).
    let mut client =
        (*client_config(&ca, &[b"http/1.1"], &[&rustls::version::TLS13], None)).clone();
    client.resumption = rustls::client::Resumption::disabled();
    let client = Arc::new(client);
    // Up before the load starts.
    let deadline = tokio::time::Instant::now() + WAIT;
    while one(addr, client.clone()).await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "the server starts");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let seen = Arc::new(Seen::default());
    let done = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let (seen, done, client) = (seen.clone(), done.clone(), client.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::Relaxed) {
                    match one(addr, client.clone()).await {
                        Ok(cert) => {
                            seen.ok.fetch_add(1, Ordering::Relaxed);
                            *seen.last.lock().unwrap() = Some(cert);
                        }
                        Err(e) => {
                            seen.failed.fetch_add(1, Ordering::Relaxed);
                            eprintln!("failed: {e}");
                        }
                    }
                }
            })
        })
        .collect();

    // Broken states a renewal can leave behind, each followed by SIGHUP under load.
    let new = ca.server("new", &["localhost"]);
    let new_cert = std::fs::read(&new.cert_path).unwrap();
    let broken: [(&str, Vec<u8>, Vec<u8>); 4] = [
        (
            "empty certificate",
            Vec::new(),
            std::fs::read(&old.key_path).unwrap(),
        ),
        (
            "not PEM",
            b"garbage\n".to_vec(),
            std::fs::read(&old.key_path).unwrap(),
        ),
        (
            "certificate cut in half",
            new_cert[..new_cert.len() / 2].to_vec(),
            std::fs::read(&new.key_path).unwrap(),
        ),
        (
            "key of another certificate",
            std::fs::read(&old.cert_path).unwrap(),
            std::fs::read(&new.key_path).unwrap(),
        ),
    ];
    for (i, (what, cert, key)) in broken.iter().enumerate() {
        std::fs::write(&files.cert, cert).unwrap();
        std::fs::write(&files.key, key).unwrap();
        let before = seen.ok.load(Ordering::Relaxed);
        sighup();
        logged(
            &log,
            "TLS reload failed; keeping the old certificates",
            i + 1,
        )
        .await;
        // Clients keep being served with the old certificate after the failed reload.
        while seen.ok.load(Ordering::Relaxed) < before + 20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            seen.last.lock().unwrap().as_ref(),
            Some(&old.der),
            "{what}: the old certificate stays"
        );
    }

    // A good pair: served from the next handshakes on.
    std::fs::copy(&new.cert_path, &files.cert).unwrap();
    std::fs::copy(&new.key_path, &files.key).unwrap();
    sighup();
    logged(&log, "TLS certificates reloaded", 1).await;
    let fresh = one(addr, client.clone()).await.unwrap();
    assert_eq!(fresh, new.der, "the good file is picked up");

    done.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    let (ok, failed) = (
        seen.ok.load(Ordering::Relaxed),
        seen.failed.load(Ordering::Relaxed),
    );
    eprintln!("broken reloads under load: {ok} requests over TLS, {failed} failed");
    assert_eq!(
        failed, 0,
        "no handshake or request failed across the broken reloads"
    );
    assert!(ok > 80, "the load ran: {ok}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
