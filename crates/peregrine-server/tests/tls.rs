//! TLS termination: real handshakes over loopback (tokio-rustls client, rcgen certificates).
#![cfg(feature = "tls")]

mod tls_support;

use peregrine_server::tls::{
    negotiated, CertificateFiles, ClientAuth, Negotiated, TlsAcceptor, TlsConfig,
};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tls_support::{client_config, client_config_any_cert, Ca};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::rustls::{self, pki_types::ServerName};
use tokio_rustls::TlsConnector;

/// Serves `acceptor` on loopback: each connection is handshaken, then told which protocol was
/// negotiated ("h2\n" or "http/1.1\n") and echoes one line. Handshake errors are counted.
async fn start(
    acceptor: TlsAcceptor,
) -> (SocketAddr, Arc<std::sync::Mutex<Vec<std::io::ErrorKind>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
    let errs = errors.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let acceptor = acceptor.clone();
            let errs = errs.clone();
            tokio::spawn(async move {
                match acceptor.accept(tcp).await {
                    Ok(mut tls) => {
                        let proto: &[u8] = match negotiated(&tls) {
                            Negotiated::Http2 => b"h2\n",
                            Negotiated::Http11 => b"http/1.1\n",
                        };
                        tls.write_all(proto).await.unwrap();
                        let mut buf = [0u8; 64];
                        if let Ok(n) = tls.read(&mut buf).await {
                            let _ = tls.write_all(&buf[..n]).await;
                            let _ = tls.shutdown().await;
                        }
                    }
                    Err(e) => errs.lock().unwrap().push(e.kind()),
                }
            });
        }
    });
    (addr, errors)
}

async fn connect(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    name: &str,
) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(config)
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
}

/// Reads the server's protocol line, sends a line and reads it back.
async fn talk(tls: &mut tokio_rustls::client::TlsStream<TcpStream>) -> String {
    let mut all = Vec::new();
    tls.write_all(b"ping\n").await.unwrap();
    tls.read_to_end(&mut all).await.unwrap();
    String::from_utf8(all).unwrap()
}

fn one_cert(ca: &Ca, names: &[&str]) -> TlsConfig {
    let leaf = ca.server("srv", names);
    TlsConfig::new(vec![CertificateFiles::new(leaf.cert_path, leaf.key_path)])
}

#[tokio::test]
async fn tls13_and_tls12_handshakes_succeed_and_alpn_picks_h2_or_http11() {
    let ca = Ca::new("versions");
    let (addr, errors) = start(TlsAcceptor::new(&one_cert(&ca, &["localhost"])).unwrap()).await;
    for (version, want) in [
        (&rustls::version::TLS13, rustls::ProtocolVersion::TLSv1_3),
        (&rustls::version::TLS12, rustls::ProtocolVersion::TLSv1_2),
    ] {
        for (alpn, proto) in [
            (
                &[b"h2".as_slice(), b"http/1.1"][..],
                if cfg!(feature = "http2") {
                    "h2\n"
                } else {
                    "http/1.1\n"
                },
            ),
            (&[b"http/1.1".as_slice()][..], "http/1.1\n"),
            (&[][..], "http/1.1\n"),
        ] {
            let mut tls = connect(
                addr,
                client_config(&ca, alpn, &[version], None),
                "localhost",
            )
            .await
            .unwrap();
            assert_eq!(tls.get_ref().1.protocol_version(), Some(want));
            assert_eq!(talk(&mut tls).await, format!("{proto}ping\n"));
        }
    }
    // A client offering only protocols the server does not speak is refused (RFC 7301 §3.2).
    let refused = connect(
        addr,
        client_config(&ca, &[b"spdy/3"], &[&rustls::version::TLS13], None),
        "localhost",
    )
    .await;
    assert!(refused.is_err());
    // The server side saw the failed handshake (recorded by its task, so allow it a moment).
    for _ in 0..200 {
        if !errors.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(errors.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn sni_picks_the_certificate_for_the_name_and_the_first_one_otherwise() {
    let ca = Ca::new("sni");
    let a = ca.server("a", &["a.test"]);
    let b = ca.server("b", &["*.b.test", "b.test"]);
    let config = TlsConfig::new(vec![
        CertificateFiles::new(&a.cert_path, &a.key_path),
        CertificateFiles::new(&b.cert_path, &b.key_path),
    ]);
    let (addr, _) = start(TlsAcceptor::new(&config).unwrap()).await;
    let presented = |tls: &tokio_rustls::client::TlsStream<TcpStream>| {
        tls.get_ref().1.peer_certificates().unwrap()[0].clone()
    };
    // Verified against the CA and the name: the right certificate or no handshake at all.
    for (name, want) in [
        ("a.test", &a.der),
        ("b.test", &b.der),
        ("api.b.test", &b.der),
    ] {
        let tls = connect(
            addr,
            client_config(&ca, &[], &[&rustls::version::TLS13], None),
            name,
        )
        .await
        .unwrap();
        assert_eq!(&presented(&tls), want, "{name}");
    }
    // A name nothing covers, and an IP address (no SNI): the default, first certificate.
    for name in ["other.test", "127.0.0.1"] {
        let tls = connect(addr, client_config_any_cert(), name).await.unwrap();
        assert_eq!(presented(&tls), a.der, "{name}");
    }
}

#[tokio::test]
async fn reload_swaps_certificates_for_new_handshakes_and_keeps_open_connections() {
    let ca = Ca::new("reload");
    let old = ca.server("old", &["localhost"]);
    let files = CertificateFiles::new(ca.dir.join("live.crt"), ca.dir.join("live.key"));
    std::fs::copy(&old.cert_path, &files.cert).unwrap();
    std::fs::copy(&old.key_path, &files.key).unwrap();
    let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![files.clone()])).unwrap();
    let store = acceptor.certificates().clone();
    let (addr, _) = start(acceptor).await;
    let client = client_config(&ca, &[], &[&rustls::version::TLS13], None);

    let mut before = connect(addr, client.clone(), "localhost").await.unwrap();
    assert_eq!(before.get_ref().1.peer_certificates().unwrap()[0], old.der);

    // A renewed certificate replaces the files; a half-written state (new key, old
    // certificate) is refused and the old pair stays in service.
    let new = ca.server("new", &["localhost"]);
    std::fs::copy(&new.key_path, &files.key).unwrap();
    assert!(store.reload().is_err());
    let still_old = connect(addr, client.clone(), "localhost").await.unwrap();
    assert_eq!(
        still_old.get_ref().1.peer_certificates().unwrap()[0],
        old.der
    );
    std::fs::copy(&new.cert_path, &files.cert).unwrap();
    store.reload().unwrap();

    let mut after = connect(addr, client, "localhost").await.unwrap();
    assert_eq!(after.get_ref().1.peer_certificates().unwrap()[0], new.der);
    // The connection made before the reload still works.
    assert_eq!(talk(&mut before).await, "http/1.1\nping\n");
    assert_eq!(talk(&mut after).await, "http/1.1\nping\n");
}

#[tokio::test]
async fn reload_when_changed_picks_up_replaced_files() {
    let ca = Ca::new("watch");
    let old = ca.server("old", &["localhost"]);
    let files = CertificateFiles::new(ca.dir.join("live.crt"), ca.dir.join("live.key"));
    std::fs::copy(&old.cert_path, &files.cert).unwrap();
    std::fs::copy(&old.key_path, &files.key).unwrap();
    let acceptor = TlsAcceptor::new(&TlsConfig::new(vec![files.clone()])).unwrap();
    peregrine_server::tls::reload_when_changed(
        acceptor.certificates().clone(),
        Duration::from_millis(50),
    )
    .unwrap();
    let (addr, _) = start(acceptor).await;
    let client = client_config(&ca, &[], &[&rustls::version::TLS13], None);
    let new = ca.server("new", &["localhost"]);
    // Written as renewal tools do: to a temporary name, then renamed over the live file.
    for (from, to) in [(&new.cert_path, &files.cert), (&new.key_path, &files.key)] {
        let tmp = to.with_extension("tmp");
        std::fs::copy(from, &tmp).unwrap();
        std::fs::rename(&tmp, to).unwrap();
    }
    // Bounded wait for the watcher (checks every 50 ms).
    for _ in 0..100 {
        let tls = connect(addr, client.clone(), "localhost").await.unwrap();
        if tls.get_ref().1.peer_certificates().unwrap()[0] == new.der {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the replaced certificate was never served");
}

#[tokio::test]
async fn slow_handshake_times_out_while_other_clients_are_served() {
    let ca = Ca::new("timeout");
    let mut config = one_cert(&ca, &["localhost"]);
    config.handshake_timeout = Duration::from_millis(300);
    let (addr, errors) = start(TlsAcceptor::new(&config).unwrap()).await;
    // A client that connects and sends half a ClientHello header, then nothing.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    // Meanwhile a normal client is served.
    let mut ok = connect(
        addr,
        client_config(&ca, &[], &[&rustls::version::TLS13], None),
        "localhost",
    )
    .await
    .unwrap();
    assert_eq!(talk(&mut ok).await, "http/1.1\nping\n");
    // The slow one is closed by the server once the timeout passes.
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf))
        .await
        .expect("the server closes a stalled handshake")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert_eq!(*errors.lock().unwrap(), vec![std::io::ErrorKind::TimedOut]);
}

#[tokio::test]
async fn mtls_required_refuses_clients_without_a_valid_certificate() {
    let ca = Ca::new("mtls");
    let clients = Ca::new("mtls-clients");
    let other = Ca::new("mtls-other");
    let mut config = one_cert(&ca, &["localhost"]);
    config.client_auth = ClientAuth::Required(clients.pem_path.clone());
    let (addr, _) = start(TlsAcceptor::new(&config).unwrap()).await;
    let good = clients.client("alice", "alice");
    let stranger = other.client("mallory", "mallory");
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let mut tls = connect(
            addr,
            client_config(&ca, &[], &[version], Some(&good)),
            "localhost",
        )
        .await
        .unwrap();
        assert_eq!(talk(&mut tls).await, "http/1.1\nping\n");
        for cert in [None, Some(&stranger)] {
            // In TLS 1.3 the client finishes before the server checks its certificate: the
            // refusal shows as an alert on the first read.
            let refused =
                match connect(addr, client_config(&ca, &[], &[version], cert), "localhost").await {
                    Err(_) => true,
                    Ok(mut tls) => {
                        let _ = tls.write_all(b"ping\n").await;
                        let mut buf = Vec::new();
                        tls.read_to_end(&mut buf).await.is_err() || buf.is_empty()
                    }
                };
            assert!(
                refused,
                "{version:?} client cert {:?}",
                cert.map(|_| "stranger")
            );
        }
    }
}

#[tokio::test]
async fn mtls_optional_serves_clients_with_and_without_a_certificate() {
    let ca = Ca::new("mtls-opt");
    let clients = Ca::new("mtls-opt-clients");
    let mut config = one_cert(&ca, &["localhost"]);
    config.client_auth = ClientAuth::Optional(clients.pem_path.clone());
    let (addr, _) = start(TlsAcceptor::new(&config).unwrap()).await;
    let good = clients.client("bob", "bob");
    for cert in [None, Some(&good)] {
        let mut tls = connect(
            addr,
            client_config(&ca, &[], &[&rustls::version::TLS13], cert),
            "localhost",
        )
        .await
        .unwrap();
        assert_eq!(talk(&mut tls).await, "http/1.1\nping\n");
    }
}

/// A certificate setup that cannot load says which file, in which role, and what is wrong with
/// it: "No such file or directory" alone does not tell a user whether TLS_CERT, TLS_KEY or
/// TLS_CLIENT_CA is at fault.
#[test]
fn startup_errors_name_the_file_and_its_role() {
    let ca = Ca::new("roles");
    let a = ca.server("a", &["a.test"]);
    let missing = ca.dir.join("missing.pem");
    let not_pem = ca.dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let load = |cert: &std::path::Path, key: &std::path::Path| {
        TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(cert, key)]))
            .unwrap_err()
            .to_string()
    };
    let cases = [
        (load(&missing, &a.key_path), "certificate file", &missing),
        (load(&a.cert_path, &missing), "private key file", &missing),
        (load(&not_pem, &a.key_path), "certificate file", &not_pem),
        (load(&a.cert_path, &not_pem), "private key file", &not_pem),
    ];
    for (err, role, path) in &cases {
        assert!(err.contains(role), "{err}");
        assert!(err.contains(&*path.to_string_lossy()), "{err}");
    }
    assert!(cases[0].0.contains("cannot read"), "{}", cases[0].0);
    assert!(
        cases[2].0.contains("no CERTIFICATE block"),
        "{}",
        cases[2].0
    );
    assert!(
        cases[3].0.contains("no PRIVATE KEY block"),
        "{}",
        cases[3].0
    );
    let mut config = one_cert(&ca, &["localhost"]);
    config.client_auth = ClientAuth::Required(missing.clone());
    let err = TlsAcceptor::new(&config).unwrap_err().to_string();
    assert!(err.contains("client CA file"), "{err}");
}

#[test]
fn a_key_that_does_not_fit_its_certificate_is_refused_at_startup() {
    let ca = Ca::new("mismatch");
    let a = ca.server("a", &["a.test"]);
    let b = ca.server("b", &["b.test"]);
    let err = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
        &a.cert_path,
        &b.key_path,
    )]))
    .unwrap_err();
    assert!(err.to_string().contains("does not fit"), "{err}");
    let err = TlsAcceptor::new(&TlsConfig::new(vec![CertificateFiles::new(
        ca.dir.join("missing.crt"),
        &a.key_path,
    )]))
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

/// The TLS transport in the driver's poll form: readiness, non-blocking reads and writes, and a
/// large response whose last records only leave while the connection waits for the next request.
#[tokio::test]
async fn tls_transport_serves_the_driver_interface() {
    use bytes::BytesMut;
    use peregrine_server::tls::TlsTransport;
    use peregrine_server::transport::Transport;
    use std::future::poll_fn;

    let ca = Ca::new("transport");
    let acceptor = TlsAcceptor::new(&one_cert(&ca, &["localhost"])).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    const BIG: usize = 2 * 1024 * 1024;
    // The transport is not `Send` (one worker thread owns a connection): a local task.
    let local = tokio::task::LocalSet::new();
    let server = local.spawn_local(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let t = TlsTransport::new(acceptor.accept(tcp).await.unwrap());
        for _round in 0..2 {
            // Read one line.
            let mut buf = BytesMut::with_capacity(1024);
            while !buf.ends_with(b"\n") {
                poll_fn(|cx| t.poll_read_ready(cx)).await.unwrap();
                match t.try_read_buf(&mut buf) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => t.clear_read_ready(),
                    Err(e) => panic!("{e}"),
                }
            }
            // Answer with BIG bytes through try_write / poll_write_ready.
            let data = vec![b'z'; BIG];
            let mut sent = 0;
            while sent < BIG {
                match t.try_write(&data[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        poll_fn(|cx| t.poll_write_ready(cx)).await.unwrap()
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
        // Wait for the client to go (the last records are flushed by this wait).
        let mut buf = BytesMut::with_capacity(16);
        loop {
            // The client goes without close_notify: an UnexpectedEof error, a close all the same.
            if poll_fn(|cx| t.poll_read_ready(cx)).await.is_err() {
                break;
            }
            match t.try_read_buf(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    local
        .run_until(async move {
            let mut tls = connect(
                addr,
                client_config(&ca, &[], &[&rustls::version::TLS13], None),
                "localhost",
            )
            .await
            .unwrap();
            for _round in 0..2 {
                tls.write_all(b"give\n").await.unwrap();
                let mut got = vec![0u8; BIG];
                tokio::time::timeout(Duration::from_secs(20), tls.read_exact(&mut got))
                    .await
                    .expect("the whole response arrives")
                    .unwrap();
                assert!(got.iter().all(|&b| b == b'z'));
            }
            drop(tls);
            server.await.unwrap();
        })
        .await;
}
