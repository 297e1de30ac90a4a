//! The TLS key log (`TlsConfig::key_log`): off, `SSLKEYLOGFILE` is ignored; on, the server writes
//! the secrets of real handshakes over TCP and over QUIC to it, the same lines the client
//! derives. One test in this binary: it sets the process's environment.
#![cfg(feature = "http3")]

mod h3_support;
mod tls_support;

use peregrine_server::{service_fn, Request, Response, ServerConfig};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tls_support::{client_config, temp_dir, Ca};
use tokio_rustls::rustls::pki_types::ServerName;
use tokio_rustls::TlsConnector;

/// The client's own record of its secrets, in the key log file's line format.
#[derive(Debug, Default)]
struct ClientLog(Mutex<Vec<String>>);

impl rustls::KeyLog for ClientLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let line = format!("{label} {} {}", hex(client_random), hex(secret));
        self.0.lock().unwrap().push(line);
    }
}

impl ClientLog {
    fn handshake_secret(&self) -> String {
        let lines = self.0.lock().unwrap();
        let mut secrets = lines
            .iter()
            .filter(|l| l.starts_with("CLIENT_HANDSHAKE_TRAFFIC_SECRET "));
        let line = secrets
            .next()
            .expect("the client derived a handshake secret");
        assert!(secrets.next().is_none(), "one handshake per client");
        line.clone()
    }
}

/// A client trusting `ca` with ALPN `alpn`, recording its secrets in `log`.
fn client(ca: &Ca, alpn: &[&[u8]], log: &Arc<ClientLog>) -> rustls::ClientConfig {
    let mut config = (*client_config(ca, alpn, &[&rustls::version::TLS13], None)).clone();
    config.key_log = log.clone();
    config
}

/// A TLS handshake over TCP (HTTP/1.1 by ALPN); the client's handshake secret line.
async fn tcp_handshake(addr: SocketAddr, ca: &Ca) -> String {
    let log = Arc::new(ClientLog::default());
    let connector = TlsConnector::from(Arc::new(client(ca, &[b"http/1.1"], &log)));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap();
    log.handshake_secret()
}

/// A QUIC handshake and an HTTP/3 request; the client's handshake secret line.
async fn quic_handshake(addr: SocketAddr, ca: &Ca) -> String {
    let log = Arc::new(ClientLog::default());
    let mut h3 = h3_support::connect_with(addr, client(ca, &[], &log))
        .await
        .unwrap();
    assert_eq!(h3.request("GET", "/", &[], b"").await.unwrap().status, 200);
    log.handshake_secret()
}

fn start(key_log: bool) -> h3_support::Running {
    let config = ServerConfig::builder().workers(1).build();
    let ok = service_fn(|_r: Request| async { Response::text("ok") });
    h3_support::serve_with(config, |tls| tls.key_log = key_log, ok)
}

#[tokio::test]
async fn key_log_records_tcp_and_quic_handshakes_only_when_on() {
    let file = temp_dir("keylog").join("keys.txt");
    std::env::set_var("SSLKEYLOGFILE", &file);

    let off = start(false);
    tcp_handshake(off.handle.local_addr(), &off.ca).await;
    quic_handshake(off.handle.local_addr(), &off.ca).await;
    assert!(!file.exists(), "written with key_log off");

    let on = start(true);
    let tcp = tcp_handshake(on.handle.local_addr(), &on.ca).await;
    let quic = quic_handshake(on.handle.local_addr(), &on.ca).await;
    let written = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = written.lines().collect();
    assert!(
        lines.contains(&tcp.as_str()),
        "TCP secret missing:\n{written}"
    );
    assert!(
        lines.contains(&quic.as_str()),
        "QUIC secret missing:\n{written}"
    );
    let handshakes = lines
        .iter()
        .filter(|l| l.starts_with("CLIENT_HANDSHAKE_TRAFFIC_SECRET "))
        .count();
    assert_eq!(handshakes, 2, "{written}");
}
