//! The h3 crate's HTTP/3 server for the lab's HTTP/3 lane: quinn's endpoint on UDP `ADDR`, an
//! `h3::server::Connection` per QUIC connection, a task per request. It answers `GET /plaintext`
//! with the contract's body, `Server` and `Date`; anything else gets 404. The certificate is the
//! lab's (`TLS_CERT`, `TLS_KEY`); `WORKERS` sets the tokio runtime's worker threads.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use bytes::Bytes;
use quinn::crypto::rustls::QuicServerConfig;
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const BODY: &[u8] = b"Hello, World!";

fn main() -> Result<(), BoxError> {
    let workers = std::env::var("WORKERS")
        .ok()
        .and_then(|w| w.parse::<usize>().ok())
        .filter(|&w| w > 0)
        .unwrap_or(1);
    let addr: SocketAddr = std::env::var("ADDR")
        .unwrap_or_else(|_| "127.0.0.1:8443".into())
        .parse()
        .map_err(|e| format!("ADDR: {e}"))?;
    let config = server_config()?;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?
        .block_on(serve(addr, config))
}

fn env_path(name: &str) -> Result<String, BoxError> {
    std::env::var(name).map_err(|_| format!("{name} is not set").into())
}

fn server_config() -> Result<quinn::ServerConfig, BoxError> {
    let cert_path = env_path("TLS_CERT")?;
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .map_err(|e| format!("TLS_CERT {cert_path}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("TLS_CERT {cert_path}: {e}"))?;
    let key_path = env_path("TLS_KEY")?;
    let key =
        PrivateKeyDer::from_pem_file(&key_path).map_err(|e| format!("TLS_KEY {key_path}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    let mut transport = quinn::TransportConfig::default();
    // The idle-memory step holds connections for a while; quinn's default idle timeout is 30 s.
    transport.max_idle_timeout(Some(Duration::from_secs(65).try_into()?));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

async fn serve(addr: SocketAddr, config: quinn::ServerConfig) -> Result<(), BoxError> {
    let endpoint = quinn::Endpoint::server(config, addr)?;
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            if let Err(e) = connection(incoming).await {
                eprintln!("h3-peer: connection: {e}");
            }
        });
    }
    Ok(())
}

async fn connection(incoming: quinn::Incoming) -> Result<(), BoxError> {
    let conn = incoming.await?;
    let mut h3_conn = h3::server::Connection::new(h3_quinn::Connection::new(conn)).await?;
    loop {
        match h3_conn.accept().await {
            Ok(Some(resolver)) => {
                tokio::spawn(async move {
                    if let Err(e) = request(resolver).await {
                        eprintln!("h3-peer: request: {e}");
                    }
                });
            }
            Ok(None) => return Ok(()),
            // The client closing its connection (H3_NO_ERROR) is how every connection ends.
            Err(e) if e.is_h3_no_error() => return Ok(()),
            Err(e) => return Err(e.into()),
        }
    }
}

async fn request(
    resolver: h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
) -> Result<(), BoxError> {
    let (req, mut stream) = resolver.resolve_request().await?;
    let found = req.method() == http::Method::GET && req.uri().path() == "/plaintext";
    let body: &'static [u8] = if found { BODY } else { b"Not Found" };
    let resp = http::Response::builder()
        .status(if found { 200 } else { 404 })
        .header("server", "h3")
        .header(
            "date",
            httpdate::fmt_http_date(std::time::SystemTime::now()),
        )
        .header("content-type", "text/plain; charset=utf-8")
        .header("content-length", body.len())
        .body(())?;
    stream.send_response(resp).await?;
    stream.send_data(Bytes::from_static(body)).await?;
    stream.finish().await?;
    Ok(())
}
