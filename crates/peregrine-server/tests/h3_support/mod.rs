//! An HTTP/3 server on loopback (the engine with TLS over TCP and HTTP/3 over UDP, rcgen
//! certificates) and the h3 crate's client over quinn to talk to it.
#![allow(dead_code)]

use super::tls_support::Ca;
use bytes::{Buf, Bytes};
use peregrine_server::h3::Http3;
use peregrine_server::tls::{CertificateFiles, TlsAcceptor, TlsConfig};
use peregrine_server::{Server, ServerConfig, ServerHandle, Service};
use std::net::SocketAddr;
use std::sync::Arc;

/// A running server and the CA its certificate is signed by.
pub struct Running {
    pub handle: ServerHandle,
    pub ca: Ca,
}

/// Serves `service` with `config` (its address forced to loopback, port 0) over TLS and HTTP/3.
pub fn serve<S: Service>(config: ServerConfig, service: S) -> Running {
    serve_with(config, |_| {}, service)
}

/// As [`serve`], with the TLS settings changed by `tls_settings` first.
pub fn serve_with<S: Service>(
    config: ServerConfig,
    tls_settings: impl FnOnce(&mut TlsConfig),
    service: S,
) -> Running {
    serve_built(config, tls_settings, |server| server, service)
}

/// As [`serve_with`], with the server changed by `build` before it starts (hooks, faults).
pub fn serve_built<S: Service>(
    mut config: ServerConfig,
    tls_settings: impl FnOnce(&mut TlsConfig),
    build: impl FnOnce(Server<TlsAcceptor>) -> Server<TlsAcceptor>,
    service: S,
) -> Running {
    config.addr = "127.0.0.1:0".parse().unwrap();
    let ca = Ca::new("h3");
    let leaf = ca.server("localhost", &["localhost"]);
    let mut settings = TlsConfig::new(vec![CertificateFiles::new(&leaf.cert_path, &leaf.key_path)]);
    tls_settings(&mut settings);
    let tls = TlsAcceptor::new(&settings).unwrap();
    let http3 = Http3::new(&tls).unwrap();
    let server = Server::new(config).with_acceptor(tls).with_http3(http3);
    let handle = build(server).serve(service).unwrap();
    Running { handle, ca }
}

/// A client connection: what sends requests on it, and the QUIC connection (to watch it close).
pub struct Client {
    pub send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    pub quic: quinn::Connection,
    pub endpoint: quinn::Endpoint,
}

/// Connects to `addr` over QUIC with ALPN `h3`, trusting `ca`; the client never idles out by
/// itself, so only the server's idle timeout applies.
pub async fn connect(addr: SocketAddr, ca: &Ca) -> Client {
    connect_with(addr, trusting(ca)).await.unwrap()
}

/// A TLS 1.3 client configuration that trusts `ca`.
pub fn trusting(ca: &Ca) -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth()
}

/// Connects with this TLS client configuration (its ALPN set to `h3`); the QUIC or HTTP/3
/// setup's error when it fails.
pub async fn connect_with(
    addr: SocketAddr,
    tls: rustls::ClientConfig,
) -> Result<Client, Box<dyn std::error::Error>> {
    connect_over(addr, tls, never_idle()).await
}

/// As [`connect_with`], with this QUIC transport configuration (the client's receive windows,
/// its idle timeout).
pub async fn connect_over(
    addr: SocketAddr,
    tls: rustls::ClientConfig,
    transport: quinn::TransportConfig,
) -> Result<Client, Box<dyn std::error::Error>> {
    let endpoint = endpoint_over(tls, transport);
    let quic = endpoint.connect(addr, "localhost")?.await?;
    Ok(over(quic, endpoint).await?)
}

/// A transport configuration whose connections never idle out by themselves.
fn never_idle() -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(None);
    transport
}

/// A client endpoint on loopback whose connections use `tls` (its ALPN set to `h3`) and never
/// idle out by themselves.
pub fn client_endpoint(tls: rustls::ClientConfig) -> quinn::Endpoint {
    endpoint_over(tls, never_idle())
}

/// A client endpoint on loopback whose connections use `tls` (its ALPN set to `h3`) and
/// `transport`.
fn endpoint_over(
    mut tls: rustls::ClientConfig,
    transport: quinn::TransportConfig,
) -> quinn::Endpoint {
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(transport));
    let mut endpoint = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    endpoint.set_default_client_config(config);
    endpoint
}

/// HTTP/3 over the QUIC connection `quic` of `endpoint` (set up without waiting for the
/// server, so it works before the handshake completes too).
pub async fn over(
    quic: quinn::Connection,
    endpoint: quinn::Endpoint,
) -> Result<Client, h3::error::ConnectionError> {
    let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone())).await?;
    tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
    Ok(Client {
        send,
        quic,
        endpoint,
    })
}

/// A response: status, fields, the whole body.
pub struct Reply {
    pub status: u16,
    pub headers: http::HeaderMap,
    pub body: Vec<u8>,
}

impl Client {
    /// Sends `method path` with `body` (in 64 KiB DATA frames) and reads the whole response.
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        fields: &[(&str, &str)],
        body: &[u8],
    ) -> Result<Reply, h3::error::StreamError> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("https://localhost{path}"));
        for (n, v) in fields {
            req = req.header(*n, *v);
        }
        let mut stream = self.send.send_request(req.body(()).unwrap()).await?;
        for piece in body.chunks(64 * 1024) {
            stream.send_data(Bytes::copy_from_slice(piece)).await?;
        }
        stream.finish().await?;
        let response = stream.recv_response().await?;
        let mut got = Vec::new();
        while let Some(mut data) = stream.recv_data().await? {
            while data.has_remaining() {
                let chunk = data.chunk();
                got.extend_from_slice(chunk);
                let n = chunk.len();
                data.advance(n);
            }
        }
        Ok(Reply {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: got,
        })
    }
}
