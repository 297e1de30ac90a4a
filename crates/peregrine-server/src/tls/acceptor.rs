//! The TLS acceptor: its configuration (certificates, client authentication, ALPN, handshake
//! timeout), the rustls server it builds, and which protocol a connection negotiated.

use super::pem::{provider, read_roots};
use super::resolver::{CertStore, CertificateFiles};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig as RustlsConfig;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// The TLS connection type handed to the HTTP drivers.
pub type TlsStream<IO> = tokio_rustls::server::TlsStream<IO>;

/// ALPN protocol id of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Whether clients must present a certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificates are asked for (the usual web server).
    #[default]
    None,
    /// Asked for and verified against these CA certificates (PEM) if sent; clients without one
    /// are still served.
    Optional(PathBuf),
    /// Required and verified against these CA certificates (PEM): the handshake fails without
    /// a valid one.
    Required(PathBuf),
}

/// TLS settings of a listener.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The certificates, chosen by SNI; the first is the default (see [`CertStore`]).
    pub certificates: Vec<CertificateFiles>,
    /// Client-certificate verification. Default [`ClientAuth::None`].
    pub client_auth: ClientAuth,
    /// The whole handshake must finish within this, or the connection is closed. Default 10 s
    /// (nginx's `ssl_handshake_timeout` is 60 s; a handshake is a few round trips).
    pub handshake_timeout: Duration,
    /// ALPN protocols offered, in preference order. Default `h2` (when the `http2` feature is
    /// on) then `http/1.1`.
    pub alpn: Vec<Vec<u8>>,
    /// Write every connection's secrets, TCP and QUIC alike, to the file the `SSLKEYLOGFILE`
    /// environment variable names (NSS key log format, read by Wireshark; rustls'
    /// `KeyLogFile`, nothing written when the variable is unset). For debugging only: whoever
    /// reads the file can decrypt the recorded traffic, which defeats TLS's secrecy. Default
    /// off, and the variable is never read without it.
    pub key_log: bool,
}

impl TlsConfig {
    /// Settings with these certificates and the defaults.
    pub fn new(certificates: Vec<CertificateFiles>) -> Self {
        let mut alpn = Vec::new();
        if cfg!(feature = "http2") {
            alpn.push(ALPN_H2.to_vec());
        }
        alpn.push(ALPN_HTTP11.to_vec());
        TlsConfig {
            certificates,
            client_auth: ClientAuth::None,
            handshake_timeout: Duration::from_secs(10),
            alpn,
            key_log: false,
        }
    }

    /// From the environment: `TLS_CERT` and `TLS_KEY` (PEM paths; several pairs separated by
    /// commas, the first being the default), `TLS_CLIENT_CA` (PEM) with `TLS_CLIENT_AUTH=optional`
    /// or `required` (the default when a CA is given). `Ok(None)` when `TLS_CERT` is unset.
    pub fn from_env() -> io::Result<Option<TlsConfig>> {
        let Ok(certs) = std::env::var("TLS_CERT") else {
            return Ok(None);
        };
        let keys =
            std::env::var("TLS_KEY").map_err(|_| bad("TLS_CERT is set but TLS_KEY is not"))?;
        let certs: Vec<&str> = certs.split(',').map(str::trim).collect();
        let keys: Vec<&str> = keys.split(',').map(str::trim).collect();
        if certs.len() != keys.len() {
            return Err(bad("TLS_CERT and TLS_KEY list different numbers of files"));
        }
        let files = certs
            .iter()
            .zip(&keys)
            .map(|(c, k)| CertificateFiles::new(c, k))
            .collect();
        let mut config = TlsConfig::new(files);
        if let Ok(ca) = std::env::var("TLS_CLIENT_CA") {
            config.client_auth = match std::env::var("TLS_CLIENT_AUTH").as_deref() {
                Ok("optional") => ClientAuth::Optional(ca.into()),
                Ok("required") | Err(_) => ClientAuth::Required(ca.into()),
                Ok(other) => {
                    return Err(bad(&format!(
                        "TLS_CLIENT_AUTH must be optional or required, not {other:?}"
                    )))
                }
            };
        }
        Ok(Some(config))
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

/// Which protocol the client chose through ALPN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Negotiated {
    /// `h2`.
    Http2,
    /// `http/1.1`, or no ALPN at all.
    Http11,
}

/// Turns accepted connections into TLS connections: one per listener, shared by its workers.
#[derive(Clone)]
pub struct TlsAcceptor {
    inner: tokio_rustls::TlsAcceptor,
    certs: Arc<CertStore>,
    handshake_timeout: Duration,
}

impl TlsAcceptor {
    /// Loads the certificates (and the client CA) and builds the rustls configuration: TLS 1.3
    /// and 1.2 only, the provider's default (AEAD, forward-secret) cipher suites, ALPN as
    /// configured.
    pub fn new(config: &TlsConfig) -> io::Result<TlsAcceptor> {
        let certs = Arc::new(CertStore::load(config.certificates.clone())?);
        let provider = Arc::new(provider());
        let builder = RustlsConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(io::Error::other)?;
        let builder = match &config.client_auth {
            ClientAuth::None => builder.with_no_client_auth(),
            ClientAuth::Optional(ca) | ClientAuth::Required(ca) => {
                let roots = Arc::new(read_roots(ca)?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
                let verifier = if matches!(config.client_auth, ClientAuth::Optional(_)) {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(verifier.build().map_err(io::Error::other)?)
            }
        };
        let mut server = builder.with_cert_resolver(certs.clone());
        server.alpn_protocols = config.alpn.clone();
        if config.key_log {
            // QUIC's configuration is a copy of this one, so it logs as well.
            server.key_log = Arc::new(rustls::KeyLogFile::new());
        }
        // Session tickets off by default in rustls' server: stateful resumption (the default
        // in-memory cache of 256 sessions) keeps resumption working without ticket keys to rotate.
        Ok(TlsAcceptor {
            inner: tokio_rustls::TlsAcceptor::from(Arc::new(server)),
            certs,
            handshake_timeout: config.handshake_timeout,
        })
    }

    /// The certificate set, to reload it ([`CertStore::reload`], [`reload_on_sighup`](super::reload_on_sighup)).
    pub fn certificates(&self) -> &Arc<CertStore> {
        &self.certs
    }

    /// The rustls configuration (for QUIC, which takes it with its own ALPN).
    #[cfg(feature = "http3")]
    pub(crate) fn rustls_config(&self) -> &Arc<RustlsConfig> {
        self.inner.config()
    }

    /// The handshake timeout in force.
    pub fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// Runs the server side of the handshake on `io`. Fails with [`io::ErrorKind::TimedOut`]
    /// when it does not finish within the handshake timeout, and with the TLS alert's error
    /// otherwise (the alert itself is sent to the client by rustls).
    pub async fn accept<IO>(&self, io: IO) -> io::Result<TlsStream<IO>>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        match tokio::time::timeout(self.handshake_timeout, self.inner.accept(io)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
    }
}

impl std::fmt::Debug for TlsAcceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsAcceptor")
            .field("certificates", &self.certs.files().len())
            .field("handshake_timeout", &self.handshake_timeout)
            .finish_non_exhaustive()
    }
}

/// The protocol the client picked for this connection through ALPN.
pub fn negotiated<IO>(stream: &TlsStream<IO>) -> Negotiated {
    match stream.get_ref().1.alpn_protocol() {
        Some(p) if p == ALPN_H2 => Negotiated::Http2,
        _ => Negotiated::Http11,
    }
}
